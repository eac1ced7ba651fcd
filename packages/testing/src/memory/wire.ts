/**
 * One client process's connection to the in-memory etcd, as `@leasehold/core`'s transport calls
 * it (its `WireClient`): etcd applies each unary call at once and the answer arrives after this
 * turn through the process (a paused process gets its answers on resume), unless a planted fault
 * says otherwise; a hung call ends at its attempt's deadline on the memory clock.
 */
import { wireErrors, type CallOptions, type WireClient } from '@leasehold/core/internal';
import type { MemoryClock } from './clock.js';
import type { FaultTarget, MemoryFaults } from './faults.js';
import type { MemoryProcess } from './process.js';

/** etcd's side of one client: the same calls, applied when made. */
export type WireHandlers = Omit<WireClient, 'close'>;

/** What the wire needs of the etcd it talks to. */
export interface WireServer {
  clock: MemoryClock;
  faults: MemoryFaults;
  handlers(process: MemoryProcess): WireHandlers;
  /** The client closed: its streams end. */
  closed(process: MemoryProcess): void;
}

type Target = Exclude<FaultTarget, 'any'>;

const closedError = () => wireErrors.unavailable('the client is closed');

export function memoryWire(server: WireServer, process: MemoryProcess): WireClient {
  let closed = false;
  const pending = new Set<(err: Error) => void>();
  const { kv, leaseClient, watchClient } = server.handlers(process);
  const answer = (fn: () => void) => queueMicrotask(() => process.run(fn));

  const unary =
    <Req, Res>(target: Target, handle: (req: Req) => Promise<Res>) =>
    (req: Req, options?: CallOptions): Promise<Res> =>
      new Promise<Res>((resolve, reject) => {
        if (closed) return reject(closedError());
        const fault = server.faults.take(target);
        if (fault?.kind === 'fail') {
          const err = wireErrors.unavailable('No connection established (planted fault)');
          return answer(() => reject(err));
        }
        if (!fault) {
          return void handle(req).then(
            (res) => answer(() => resolve(res)),
            (err: Error) => answer(() => reject(err)),
          );
        }
        // Hung: etcd may have applied the request, the client never hears of it.
        if (fault.applied) handle(req).catch(() => {});
        const fail = (err: Error) => {
          pending.delete(fail);
          server.clock.cancel(timer);
          answer(() => reject(err));
        };
        pending.add(fail);
        const deadline = options?.deadline;
        const ms = deadline === undefined ? Infinity : Math.max(0, Number(deadline) - Date.now());
        const timer = Number.isFinite(ms)
          ? server.clock.schedule(server.clock.now() + ms, () => fail(wireErrors.deadline()))
          : 0;
      });

  const stream =
    <S>(open: () => Promise<S>) =>
    (): Promise<S> =>
      closed ? Promise.reject(closedError()) : open();

  return {
    kv: {
      range: unary('kv', kv.range),
      txn: unary('kv', kv.txn),
      put: unary('kv', kv.put),
      deleteRange: unary('kv', kv.deleteRange),
    },
    leaseClient: {
      leaseGrant: unary('lease', leaseClient.leaseGrant),
      leaseRevoke: unary('lease', leaseClient.leaseRevoke),
      leaseTimeToLive: unary('lease', leaseClient.leaseTimeToLive),
      leaseKeepAlive: stream(leaseClient.leaseKeepAlive),
    },
    watchClient: { watch: stream(watchClient.watch) },
    close: () => {
      if (closed) return;
      closed = true;
      for (const fail of [...pending]) fail(closedError());
      server.closed(process);
    },
  };
}
