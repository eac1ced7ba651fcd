/**
 * The server's side of every hold: a watch on the workloads' prefixes, straight to the cluster
 * (no fault proxy in the way), that prints a `server-delete` line whenever etcd deletes a key
 * there — a release, a revoke, a lease that expired, a delete from outside — with the time the
 * runner heard of it (a little after the deletion itself). The checker holds every holder to it:
 * whatever removed its key, it must stop believing within one round trip of its own.
 */
import type { Etcd3, Watcher } from 'etcd3';
import type { HistoryLine } from './check/index.js';

const now = () => performance.timeOrigin + performance.now();

export async function observeDeletes(
  endpoints: string[],
  prefix: string,
  push: (line: HistoryLine) => void,
): Promise<{ close(): Promise<void> }> {
  const { Etcd3 } = await import('etcd3');
  const client: Etcd3 = new Etcd3({ hosts: endpoints });
  const watcher: Watcher = await client.watch().prefix(prefix).create();
  watcher.on('delete', (kv) => {
    push({
      at: now(),
      process: 'observer',
      type: 'info',
      op: 'server-delete',
      key: kv.key.toString(),
      revision: String(kv.mod_revision),
    });
  });
  // A watch broken by a restore or a restart resumes on its own; what it misses is not checked.
  watcher.on('error', () => {});
  return {
    async close() {
      await watcher.cancel().catch(() => {});
      client.close();
    },
  };
}
