/**
 * etcd's Prometheus metrics, read from each member's client URL (etcd serves /metrics there) and
 * summed over the members: CPU seconds and gRPC calls of the whole cluster.
 */
export async function scrape(endpoints) {
  const series = [];
  for (const url of endpoints) {
    const res = await fetch(new URL('/metrics', url), { signal: AbortSignal.timeout(5_000) });
    if (!res.ok) throw new Error(`GET ${url}/metrics answered ${res.status}`);
    for (const line of (await res.text()).split('\n')) {
      if (line === '' || line.startsWith('#')) continue;
      const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
      if (!match) continue;
      const labels = {};
      for (const [, k, v] of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[k] = v;
      series.push({ name: match[1], labels, value: Number(match[3]) });
    }
  }
  return { at: Date.now(), series };
}

/** Sum of the series named `name` whose labels include `match`. */
export function sum(snapshot, name, match = {}) {
  let total = 0;
  for (const s of snapshot.series) {
    if (s.name !== name) continue;
    if (Object.entries(match).every(([k, v]) => s.labels[k] === v)) total += s.value;
  }
  return total;
}

/** Per gRPC method: unary calls handled plus stream messages received, between two snapshots. */
export function rpcDelta(before, after) {
  const methods = new Set();
  for (const s of after.series) {
    if (s.name === 'grpc_server_handled_total' || s.name === 'grpc_server_msg_received_total') {
      methods.add(s.labels.grpc_method);
    }
  }
  const out = {};
  for (const method of methods) {
    const type = after.series.find((s) => s.labels.grpc_method === method)?.labels.grpc_type;
    // A stream's messages are its calls (keepalives, watch requests); a unary call is one message.
    const metric =
      type === 'unary' ? 'grpc_server_handled_total' : 'grpc_server_msg_received_total';
    const delta =
      sum(after, metric, { grpc_method: method }) - sum(before, metric, { grpc_method: method });
    if (delta > 0) out[method] = delta;
  }
  return out;
}

/** etcd CPU between two snapshots, as a percentage of one core. */
export function cpuPercent(before, after) {
  const seconds =
    sum(after, 'process_cpu_seconds_total') - sum(before, 'process_cpu_seconds_total');
  return (100 * seconds) / ((after.at - before.at) / 1000);
}

/** Streams of `method` started between two snapshots. */
export function streamsStarted(before, after, method) {
  const name = 'grpc_server_started_total';
  return sum(after, name, { grpc_method: method }) - sum(before, name, { grpc_method: method });
}
