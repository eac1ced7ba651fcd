import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BinaryMember } from './binary-member.js';
import { makeCluster } from './cluster.js';
import { buildEtcdArgs, clientUrlOf } from './etcd-args.js';
import { planMembers } from './plan-members.js';
import type { ResolvedEtcdOptions } from './options.js';
import { trackTempDir, untrackTempDir } from './process-registry.js';
import type { EtcdCluster } from './types.js';
import { withDeadline } from './wait.js';

/** Starts `options.members` etcd child processes on free loopback ports, in parallel. */
export async function startBinaryCluster(
  options: ResolvedEtcdOptions,
  binary: string,
): Promise<EtcdCluster> {
  const root = await mkdtemp(join(tmpdir(), 'leasehold-etcd-'));
  trackTempDir(root);
  const { token, specs } = await planMembers(options.members, (name) => join(root, name));
  const members = specs.map(
    (spec) =>
      new BinaryMember({
        name: spec.name,
        clientUrl: clientUrlOf(spec),
        binary,
        args: buildEtcdArgs(spec, specs, token),
        startupTimeoutMs: options.startupTimeoutMs,
        log: options.log,
      }),
  );
  const dispose = async () => {
    await Promise.allSettled(members.map((m) => m.kill()));
    await rm(root, { recursive: true, force: true });
    untrackTempDir(root);
  };
  try {
    // All members at once: a multi-member cluster has no leader (and no healthy member) until a
    // quorum runs.
    await withDeadline(
      Promise.all(members.map((m) => m.start(options.signal))),
      options.startupTimeoutMs + 1000,
      `starting ${options.members} etcd process(es)`,
      options.signal,
    );
  } catch (error) {
    await dispose();
    throw error;
  }
  options.log(
    `[leasehold/testing] etcd binary ${binary}: ${members.map((m) => m.clientUrl).join(',')}`,
  );
  return makeCluster(
    'binary',
    members.map((m) => m.clientUrl),
    members,
    dispose,
  );
}
