import type { Clock } from './clock.js';

/**
 * When the local copy of a lease must be presumed dead.
 *
 * etcd starts a lease's TTL when it *receives* a keepalive, and may extend it (a leader change
 * refreshes TTLs) but never shortens it. The client cannot know the receive time, but it knows
 * the keepalive was received after it was *sent*; so `sentAt + TTL` can only be early, never
 * late. The safety margin absorbs clock-rate drift and timer lateness on top of that.
 */
export class LeaseDeadline {
  #expiresAt: number;

  constructor(
    private readonly clock: Clock,
    private readonly safetyMarginMs: number,
    sentAt: number,
    ttlSeconds: number,
  ) {
    this.#expiresAt = sentAt + ttlSeconds * 1000 - safetyMarginMs;
  }

  /** Records an answered keepalive. Never moves the deadline backwards. */
  answered(sentAt: number, ttlSeconds: number): void {
    this.#expiresAt = Math.max(this.#expiresAt, sentAt + ttlSeconds * 1000 - this.safetyMarginMs);
  }

  get expiresAt(): number {
    return this.#expiresAt;
  }

  remainingMs(): number {
    return Math.max(0, this.#expiresAt - this.clock.now());
  }

  passed(): boolean {
    return this.clock.now() >= this.#expiresAt;
  }
}
