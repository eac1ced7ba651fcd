/**
 * etcd's leases in memory: granted with a TTL, renewed by keepalives, and at their end (expiry on
 * the memory clock, or a revoke) every key attached to them is deleted at one revision.
 */
import { wireErrors } from '@leasehold/core/internal';
import type { MemoryClock } from './clock.js';
import type { MemoryKv } from './kv.js';

/** etcd's minimum TTL with its default timing (1.5 election timeouts, rounded up). */
export const MIN_LEASE_TTL_SECONDS = 2;
/** etcd's maximum TTL. */
export const MAX_LEASE_TTL_SECONDS = 9_000_000_000;

interface Lease {
  id: bigint;
  ttlSeconds: number;
  expiresAt: number;
  timer: number;
}

export class MemoryLeases {
  readonly #leases = new Map<bigint, Lease>();
  /** Lease ids look like etcd's: large, and never reused. */
  #nextId = 0x7e57_0000_0000n;

  constructor(
    private readonly clock: MemoryClock,
    private readonly kv: () => MemoryKv,
  ) {}

  has(id: bigint): boolean {
    return this.#leases.has(id);
  }

  /** Live lease ids, in grant order. */
  ids(): bigint[] {
    return [...this.#leases.keys()];
  }

  grant(ttlSeconds: number, id = 0n): { id: bigint; ttlSeconds: number } {
    if (ttlSeconds > MAX_LEASE_TTL_SECONDS)
      throw wireErrors.refused('etcdserver: too large lease TTL');
    if (id !== 0n && this.#leases.has(id))
      throw wireErrors.refused('etcdserver: lease already exists');
    const leaseId = id === 0n ? ++this.#nextId : id;
    const ttl = Math.max(MIN_LEASE_TTL_SECONDS, ttlSeconds);
    const lease: Lease = { id: leaseId, ttlSeconds: ttl, expiresAt: 0, timer: 0 };
    this.#leases.set(leaseId, lease);
    this.#renew(lease);
    return { id: leaseId, ttlSeconds: ttl };
  }

  /** Ends the lease and deletes its keys; refused for a lease etcd does not have. */
  revoke(id: bigint): void {
    const lease = this.#leases.get(id);
    if (!lease) throw wireErrors.leaseNotFound();
    this.#end(lease);
  }

  /** Renews the lease: its TTL, or 0 if it is gone (etcd's keepalive answer). */
  keepAlive(id: bigint): number {
    const lease = this.#leases.get(id);
    if (!lease) return 0;
    this.#renew(lease);
    return lease.ttlSeconds;
  }

  /** Whole seconds left (rounded down, as etcd does) and the TTL granted; -1 and 0 if gone. */
  timeToLive(id: bigint): { ttlSeconds: number; grantedSeconds: number } {
    const lease = this.#leases.get(id);
    if (!lease) return { ttlSeconds: -1, grantedSeconds: 0 };
    const left = Math.floor((lease.expiresAt - this.clock.now()) / 1000);
    return { ttlSeconds: Math.max(0, left), grantedSeconds: lease.ttlSeconds };
  }

  #renew(lease: Lease): void {
    this.clock.cancel(lease.timer);
    lease.expiresAt = this.clock.now() + lease.ttlSeconds * 1000;
    lease.timer = this.clock.schedule(lease.expiresAt, () => this.#end(lease));
  }

  #end(lease: Lease): void {
    this.clock.cancel(lease.timer);
    this.#leases.delete(lease.id);
    this.kv().deleteLeased(lease.id);
  }
}
