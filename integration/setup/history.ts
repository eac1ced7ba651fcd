/**
 * etcd's own history of a prefix, as a test's evidence: every event under it from a revision on,
 * in revision order, recorded by a watch (ordered and gap-free from its start revision).
 */
import type { Etcd3, IKeyValue } from 'etcd3';
import { waitFor } from './etcd.js';

export interface HistoryEvent {
  kind: 'put' | 'delete';
  key: string;
  value: string;
  create: bigint;
  /** The event's revision. */
  revision: bigint;
}

export interface History {
  readonly events: readonly HistoryEvent[];
  /** Puts `marker` (a key under the prefix), waits until the watch has seen it, and stops. */
  close(marker: string): Promise<readonly HistoryEvent[]>;
}

/** Records every event under `prefix` from the revision after `afterRevision`. */
export async function recordHistory(
  admin: Etcd3,
  prefix: string,
  afterRevision: bigint,
): Promise<History> {
  const events: HistoryEvent[] = [];
  const push = (kind: 'put' | 'delete') => (kv: IKeyValue) =>
    events.push({
      kind,
      key: kv.key.toString(),
      value: kv.value.toString(),
      create: BigInt(kv.create_revision),
      revision: BigInt(kv.mod_revision),
    });
  const watcher = await admin
    .watch()
    .prefix(prefix)
    .startRevision((afterRevision + 1n).toString())
    .create();
  watcher.on('put', push('put'));
  watcher.on('delete', push('delete'));
  return {
    events,
    async close(marker) {
      await admin.put(marker).value('end');
      await waitFor(() => events.some((e) => e.key === marker), {
        what: `the history watch reaches ${marker}`,
      });
      await watcher.cancel();
      return events.filter((e) => e.key !== marker);
    },
  };
}

/** The revision etcd is at now. */
export async function currentRevision(admin: Etcd3, anyKey: string): Promise<bigint> {
  const res = await admin.kv.range({ key: Buffer.from(anyKey) });
  return BigInt(res.header.revision);
}
