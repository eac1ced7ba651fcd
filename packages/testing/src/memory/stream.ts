/**
 * A duplex stream between a client process and the in-memory etcd, shaped as the SDK uses
 * etcd3's: the client writes requests; etcd's answers reach the client's 'data' listeners through
 * its process (so a paused process gets them on resume, in order). Ending or cancelling it stops
 * both directions; the SDK's own error and end listeners are never called (etcd never breaks it).
 */
import { EventEmitter } from 'node:events';
import type { MemoryProcess } from './process.js';

export class MemoryStream<Req, Res> {
  readonly #events = new EventEmitter();
  #open = true;

  constructor(
    private readonly process: MemoryProcess,
    private readonly serve: (req: Req, stream: MemoryStream<Req, Res>) => void,
    private readonly onClose: () => void = () => {},
  ) {
    // An 'error' without a listener would throw; the SDK listens, a stray stream must not crash.
    this.#events.on('error', () => {});
  }

  get open(): boolean {
    return this.#open;
  }

  write(item: Req): void {
    if (!this.#open) throw new Error('write after end');
    // The request arrives at etcd after this turn, as it would over a socket.
    queueMicrotask(() => this.#open && this.serve(item, this));
  }

  end(): void {
    this.#close();
  }

  cancel(): void {
    this.#close();
  }

  on(event: 'data' | 'error' | 'end', fn: (...args: never[]) => void): this {
    this.#events.on(event, fn as (...args: unknown[]) => void);
    return this;
  }

  /** etcd sends `res` to the client. */
  send(res: Res): void {
    queueMicrotask(() =>
      this.process.run(() => {
        if (this.#open) this.#events.emit('data', res);
      }),
    );
  }

  #close(): void {
    if (!this.#open) return;
    this.#open = false;
    this.onClose();
  }
}
