import type { Socket } from 'node:net';

/** The proxy's behaviour, read on every decision so a mode change applies to queued bytes too. */
export type FaultMode = 'pass' | 'stall' | 'delay' | 'reset';
export interface FaultPolicy {
  mode: FaultMode;
  delayMs: number;
}

// Stop reading from the source once this many chunks wait in memory (stall/delay/backpressure),
// so TCP flow control pushes back on the sender instead of us buffering without bound.
const MAX_QUEUED_CHUNKS = 256;

/**
 * Moves bytes one way, src → dst, whole chunks in arrival order. It never drops or reorders a
 * byte, because a gap in the middle of an HTTP/2 stream corrupts the framing for every call on
 * the connection: faults are whole-connection (stall, delay, reset) instead.
 */
export class Forwarder {
  private readonly queue: { chunk: Buffer; dueAt: number }[] = [];
  private srcEnded = false;
  private dstBlocked = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly src: Socket,
    private readonly dst: Socket,
    private readonly policy: () => FaultPolicy,
  ) {
    src.on('data', (chunk: Buffer) => {
      const { mode, delayMs } = this.policy();
      this.queue.push({ chunk, dueAt: performance.now() + (mode === 'delay' ? delayMs : 0) });
      this.pump();
    });
    src.on('end', () => {
      this.srcEnded = true;
      this.pump();
    });
    dst.on('drain', () => {
      this.dstBlocked = false;
      this.pump();
    });
  }

  /** Forwards whatever the current mode allows; call again whenever the mode changes. */
  pump(): void {
    this.clearTimer();
    if (this.dst.destroyed) return;
    const { mode } = this.policy();
    if (mode === 'pass' || mode === 'delay') {
      while (this.queue.length > 0 && !this.dstBlocked) {
        const head = this.queue[0]!;
        const wait = mode === 'delay' ? head.dueAt - performance.now() : 0;
        if (wait > 0) {
          this.timer = setTimeout(() => this.pump(), Math.ceil(wait));
          break;
        }
        this.queue.shift();
        if (!this.dst.write(head.chunk)) this.dstBlocked = true;
      }
      if (this.queue.length === 0 && this.srcEnded && !this.dst.writableEnded) this.dst.end();
    }
    this.updateFlow(mode);
  }

  dispose(): void {
    this.clearTimer();
    this.queue.length = 0;
  }

  private updateFlow(mode: FaultMode): void {
    if (this.src.destroyed) return;
    const read = mode !== 'stall' && !this.dstBlocked && this.queue.length < MAX_QUEUED_CHUNKS;
    if (read && this.src.isPaused()) this.src.resume();
    else if (!read && !this.src.isPaused()) this.src.pause();
  }

  private clearTimer(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
