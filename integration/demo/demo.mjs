// pnpm demo — the story fencing tokens exist for, told with real processes.
//
// Worker A takes a lock and writes. A is frozen (SIGSTOP) past its lease, as a long GC pause or
// a VM migration would. B takes the lock and writes. A wakes up and, believing it still holds
// the lock, writes again. With fencing the store refuses A's stale write; without it, A's write
// silently destroys B's. Exit code 0 only if the fenced run kept B's data.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { startEtcd } from '@leasehold/testing';
import { openStore } from './store.mjs';

const started = performance.now();
const t = () => `+${((performance.now() - started) / 1000).toFixed(2)}s`.padStart(7);
const say = (who, text) => console.log(`[${t()}] ${who.padEnd(5)} ${text}`);

function startWorker(name, endpoints, storeUrl) {
  const script = fileURLToPath(new URL('./demo-worker.mjs', import.meta.url));
  const child = spawn(process.execPath, [script, endpoints.join(','), storeUrl], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const pending = new Map();
  let seq = 0;
  const ready = new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`worker ${name} exited (${code})`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const msg = JSON.parse(line);
      if (msg.ready) return resolve();
      pending.get(msg.seq)?.(msg);
    });
  });
  const request = (cmd, args = {}, timeoutMs = 30_000) =>
    new Promise((resolve, reject) => {
      const id = ++seq;
      const timer = setTimeout(
        () => reject(new Error(`worker ${name}: ${cmd} took over ${timeoutMs} ms`)),
        timeoutMs,
      );
      pending.set(id, (msg) => (clearTimeout(timer), resolve(msg)));
      child.stdin.write(`${JSON.stringify({ seq: id, cmd, ...args })}\n`);
    });
  return {
    name,
    child,
    ready,
    request,
    stop: () => (child.kill('SIGCONT'), child.kill('SIGKILL')),
  };
}

async function story({ fenced, endpoints, storeUrl, store, lockName }) {
  await store.reset();
  const a = startWorker('A', endpoints, storeUrl);
  const b = startWorker('B', endpoints, storeUrl);
  try {
    await Promise.all([a.ready, b.ready]);
    const ta = (await a.request('acquire', { name: lockName })).token;
    say('A', `acquired lock "${lockName}" — fencing token ${ta} (lease TTL 2 s)`);
    await a.request('write', { value: 'total=100 (written by A)', fenced });
    say('A', `wrote invoice-42: "total=100 (written by A)"`);

    a.child.kill('SIGSTOP');
    say('A', 'is frozen (SIGSTOP): a long GC pause, VM migration, swap storm…');
    say('B', `asks for lock "${lockName}"; it waits until A's lease expires on the server`);
    const tb = (await b.request('acquire', { name: lockName })).token;
    say(
      'B',
      `acquired lock "${lockName}" — fencing token ${tb} (${BigInt(tb) > BigInt(ta) ? 'larger than' : 'NOT larger than'} A's ${ta})`,
    );
    await b.request('write', { value: 'total=250 (written by B)', fenced });
    say('B', `wrote invoice-42: "total=250 (written by B)"`);

    a.child.kill('SIGCONT');
    say(
      'A',
      'wakes up (SIGCONT) and, still thinking it holds the lock, writes "total=100 (stale, by A)"',
    );
    const stale = await a.request('write', { value: 'total=100 (stale, by A)', fenced });
    say('A', `its lock signal had ${stale.lostBefore ? 'already' : 'NOT'} aborted when it woke up`);
    if (stale.ok) say('store', `ACCEPTED A's write with old token ${ta}`);
    else say('store', `REJECTED A's write: ${stale.error}: ${stale.message}`);
    const row = await store.read('invoice-42');
    say('store', `invoice-42 is now "${row.body}" (fence ${row.fence})`);
    return { staleAccepted: stale.ok, finalBody: row.body };
  } finally {
    a.stop();
    b.stop();
  }
}

const workDir = mkdtempSync(join(tmpdir(), 'leasehold-demo-'));
// LEASEHOLD_DEMO_STORE picks the store (an SQLite path, postgres:// or redis:// URL); else
// PostgreSQL when DATABASE_URL is set; else an SQLite file in a temporary directory.
const storeUrl =
  process.env.LEASEHOLD_DEMO_STORE ?? process.env.DATABASE_URL ?? join(workDir, 'demo.sqlite');
let etcd;
let code = 1;
try {
  console.log('leasehold demo: fencing tokens stop a paused lock holder from corrupting data\n');
  etcd = await startEtcd();
  const store = await openStore(storeUrl);
  say(
    'setup',
    `etcd (${etcd.provider}) at ${etcd.endpoints.join(', ')}; store: ${store.kind}${store.kind === 'SQLite' ? ` ${storeUrl}` : ''}`,
  );

  console.log(
    '\n— Run 1: writes carry the fencing token; the store keeps the highest it has seen —',
  );
  const fencedRun = await story({
    fenced: true,
    endpoints: etcd.endpoints,
    storeUrl,
    store,
    lockName: 'invoice-42',
  });

  console.log('\n— Run 2: the same story without fencing (a lock alone) —');
  const plainRun = await story({
    fenced: false,
    endpoints: etcd.endpoints,
    storeUrl,
    store,
    lockName: 'invoice-42-unfenced',
  });
  await store.close();

  const ok = !fencedRun.staleAccepted && fencedRun.finalBody.includes('by B');
  console.log('\nResult');
  console.log(
    `  with fencing:    ${ok ? "A's stale write was rejected; B's data survived." : 'FAILED: the stale write got through.'}`,
  );
  console.log(
    `  without fencing: ${plainRun.staleAccepted && !plainRun.finalBody.includes('by B') ? "A's stale write landed and overwrote B's data: the record is corrupt." : 'the stale write happened not to land this time.'}`,
  );
  code = ok ? 0 : 1;
} catch (err) {
  console.error(`demo failed: ${err?.stack ?? err}`);
} finally {
  await etcd?.close();
  rmSync(workDir, { recursive: true, force: true });
}
process.exit(code);
