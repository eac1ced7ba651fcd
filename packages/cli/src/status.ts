/**
 * The status line shown on a terminal while `run` waits for a lock or `elect` for leadership:
 * who holds it, their token, for how long, and our place in the queue. Redrawn in place once a
 * second; never shown when stderr is not a terminal.
 *
 * etcd keeps no times, so "for how long" is measured from when this process first saw that
 * holder: "for at least" while it already held the lock when we started looking.
 */
import type { Holder } from '@leasehold/core';
import { formatDuration, printable, quotedValue } from './format.js';

export interface WaitView {
  /** Who is first now, if anyone. */
  holder: Pick<Holder, 'value' | 'token'> | undefined;
  /** Keys ahead of ours (the holder included); `undefined` until our key is in the queue. */
  ahead: number | undefined;
}

export interface Seen {
  token: bigint;
  /** When this process first saw that token first in the queue (ms, any monotonic clock). */
  since: number;
  /** It was already first at our first look, so it may have held longer. */
  before: boolean;
}

/** What is waited for: a lock, leadership, or a permit of a semaphore of `permits`. */
export type WaitKind = 'lock' | 'election' | { permits: number };

/** The status line's text. `kind` is what is waited for. */
export function describeWait(
  kind: WaitKind,
  name: string,
  view: WaitView,
  seen: Seen | undefined,
  now: number,
): string {
  const what =
    kind === 'lock'
      ? `waiting for lock "${printable(name)}"`
      : kind === 'election'
        ? `waiting to lead "${printable(name)}"`
        : `waiting for a permit of semaphore "${printable(name)}" (${kind.permits} permits)`;
  const { holder, ahead } = view;
  if (holder === undefined) {
    const nobody = kind === 'lock' ? 'holds it' : kind === 'election' ? 'leads' : 'holds one';
    return `${what}: nobody ${nobody}, taking it`;
  }
  const who = quotedValue(holder.value);
  const verb = kind === 'election' ? 'led by' : 'held by';
  const forMs = seen?.token === holder.token ? now - seen.since : undefined;
  const held =
    forMs === undefined || (seen!.before && forMs < 1_000)
      ? ''
      : ` for ${seen!.before ? 'at least ' : ''}${formatDuration(forMs)}`;
  const place = ahead === undefined ? 'joining the queue' : `${ahead} ahead of us in the queue`;
  return `${what}: ${verb} ${who} (token ${holder.token})${held}; ${place}`;
}

/** A line redrawn in place on a terminal stream. */
export class StatusLine {
  #shown = false;
  constructor(private readonly stream: NodeJS.WriteStream) {}

  show(text: string): void {
    const width = this.stream.columns > 1 ? this.stream.columns - 1 : 200;
    const chars = [...text];
    const fitted = chars.length > width ? `${chars.slice(0, width - 1).join('')}…` : text;
    this.stream.write(`\r\x1b[2K${fitted}`);
    this.#shown = true;
  }

  clear(): void {
    if (this.#shown) this.stream.write('\r\x1b[2K');
    this.#shown = false;
  }
}

/**
 * Refreshes the status line every `intervalMs` from `read()` until stopped. A failed read keeps
 * the last line (the wait itself reports errors that matter).
 */
export function startStatus(
  stream: NodeJS.WriteStream,
  kind: WaitKind,
  name: string,
  read: () => Promise<WaitView>,
  intervalMs = 1_000,
): { stop(): void } {
  const line = new StatusLine(stream);
  let seen: Seen | undefined;
  let first = true;
  let busy = false;
  let stopped = false;
  const refresh = async () => {
    if (busy || stopped) return;
    busy = true;
    try {
      const view = await read();
      if (stopped) return;
      const now = performance.now();
      const token = view.holder?.token;
      if (token !== undefined && seen?.token !== token) {
        seen = { token, since: now, before: first };
      } else if (token === undefined) {
        seen = undefined;
      }
      first = false;
      line.show(describeWait(kind, name, view, seen, now));
    } catch {
      // keep the last line
    } finally {
      busy = false;
    }
  };
  void refresh();
  const timer = setInterval(() => void refresh(), intervalMs);
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
      line.clear();
    },
  };
}
