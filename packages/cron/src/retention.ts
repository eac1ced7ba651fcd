/**
 * Retention leases: what keeps fire records in etcd for `retentionSeconds` after their claim, and
 * then removes them without anyone having to delete them.
 *
 * A record must outlive its runner (a replica that reaches the fire late must find it, also after
 * the runner stopped or died), so it cannot go on the runner's lease, nor on any lease a client
 * revokes when it closes (a core `Session` is revoked by `client.close()`). And a lease kept alive
 * forever would keep every record forever. So records go on leases that nobody keeps alive:
 * granted with a TTL of retention plus a rotation period, used for new records during that
 * rotation period only, then left to expire. A record written during a lease's rotation period
 * lives at least `retentionSeconds` (etcd may keep a lease longer, after a leader change, never
 * shorter), at most retention + rotation. Leases per scheduler: about 11 at any time, whatever the
 * number of fires. A lease whose grant answer was lost simply expires, holding nothing: grants are
 * safe to retry.
 */
import type { Leasehold } from '@leasehold/core';
import { grantLease } from '@leasehold/core/internal';

/** The rotation period of a retention lease: a tenth of retention, at least one second. */
export const rotationSeconds = (retentionSeconds: number): number =>
  Math.max(1, Math.ceil(retentionSeconds / 10));

interface Current {
  id: string;
  /** `performance.now()` when the grant was sent: the lease's time counts from before that. */
  usableUntil: number;
}

/** The retention leases of one scheduler (or coordinator), by retention. */
export class RetentionLeases {
  readonly #current = new Map<number, Current>();
  readonly #pending = new Map<number, Promise<string>>();

  constructor(private readonly client: Leasehold) {}

  /** A lease to put a new record on, so that it lives at least `retentionSeconds`. */
  lease(retentionSeconds: number): Promise<string> {
    const current = this.#current.get(retentionSeconds);
    if (current && performance.now() < current.usableUntil) return Promise.resolve(current.id);
    let pending = this.#pending.get(retentionSeconds);
    if (!pending) {
      const rotation = rotationSeconds(retentionSeconds);
      const sentAt = performance.now();
      pending = grantLease(this.client, 'retention lease grant', retentionSeconds + rotation)
        .then((res) => {
          // Granted TTL may be higher than asked (never lower); usable for one rotation period.
          const id = res.leaseId.toString();
          this.#current.set(retentionSeconds, { id, usableUntil: sentAt + rotation * 1000 });
          return id;
        })
        .finally(() => this.#pending.delete(retentionSeconds));
      this.#pending.set(retentionSeconds, pending);
    }
    return pending;
  }

  /** Forgets a lease etcd no longer has (revoked by someone): the next record gets a new one. */
  forget(id: string): void {
    for (const [retention, current] of this.#current) {
      if (current.id === id) this.#current.delete(retention);
    }
  }
}
