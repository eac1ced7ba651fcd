/**
 * For leasehold's own packages only (e.g. `@leasehold/fence/etcd`): raw access to a client's
 * etcd connection. Not part of the public API and free to change in any release.
 */
import type { Leasehold } from './client.js';
import type { EtcdTransport } from './etcd.js';

export type { EtcdTransport };

/** The etcd connection behind a client: deadlines, retries and cluster-id checks included. */
export function transportOf(client: Leasehold): EtcdTransport {
  return client.transport;
}
