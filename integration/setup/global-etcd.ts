import { DEFAULT_ETCD_IMAGE, startEtcd } from '@leasehold/testing';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    etcdEndpoints: string[];
    etcdProvider: string;
  }
}

/**
 * One 1-member etcd for the whole integration run. Tests share it and keep to their own key
 * prefixes (uniquePrefix), so nothing ever wipes the keyspace. Tests that stop, pause or kill
 * members start their own cluster instead.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started = performance.now();
  // etcd's own log stays out of the test output; a failed start reports its last lines.
  const cluster = await startEtcd();
  const image =
    cluster.provider === 'container'
      ? ` image=${process.env.LEASEHOLD_ETCD_IMAGE ?? DEFAULT_ETCD_IMAGE}`
      : '';
  console.log(
    `[leasehold] integration etcd: provider=${cluster.provider}${image} ` +
      `endpoints=${cluster.endpoints.join(',')} ready in ${Math.round(performance.now() - started)} ms`,
  );
  project.provide('etcdEndpoints', cluster.endpoints);
  project.provide('etcdProvider', cluster.provider);
  return () => cluster.close();
}
