import { spawn } from 'node:child_process';
import { mkdtemp, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BinaryMember, etcdFreeEnv } from './binary-member.js';
import { makeCluster } from './cluster.js';
import { EtcdHarnessError } from './errors.js';
import { enableAuth, rootHeaders } from './auth-setup.js';
import {
  buildEtcdArgs,
  buildRestoreArgs,
  clientUrlOf,
  controlUrlOf,
  type MemberSpec,
} from './etcd-args.js';
import { findEtcdctl } from './find-binary.js';
import { LogTail } from './log-tail.js';
import { planMembers } from './plan-members.js';
import type { ResolvedEtcdOptions } from './options.js';
import { trackChild, trackTempDir, untrackTempDir } from './process-registry.js';
import { checkSnapshotFile, SnapshotFiles } from './snapshot.js';
import type { EtcdCluster } from './types.js';
import { allSettledOrThrow, withDeadline } from './wait.js';

/** Deadline for one `etcdctl snapshot restore`. */
const RESTORE_TIMEOUT_MS = 30_000;

/** Starts `options.members` etcd child processes on free loopback ports, in parallel. */
export async function startBinaryCluster(
  options: ResolvedEtcdOptions,
  binary: string,
): Promise<EtcdCluster> {
  const root = await mkdtemp(join(tmpdir(), 'leasehold-etcd-'));
  trackTempDir(root);
  const { token, specs } = await planMembers(
    options.members,
    (name) => join(root, name),
    options.tls !== undefined,
  );
  const snapshots = new SnapshotFiles();
  const { tls, auth } = options;
  // Root's token, from the member itself: a snapshot must not depend on another member.
  const controlHeaders = (spec: MemberSpec) => async () =>
    auth ? rootHeaders(controlUrlOf(spec), auth.rootPassword) : {};
  const members = specs.map(
    (spec) =>
      new BinaryMember({
        name: spec.name,
        clientUrl: clientUrlOf(spec),
        controlUrl: controlUrlOf(spec),
        controlHeaders: controlHeaders(spec),
        binary,
        args: buildEtcdArgs(spec, specs, token, { tls, auth }),
        startupTimeoutMs: options.startupTimeoutMs,
        log: options.log,
        snapshots,
      }),
  );
  // All members at once: a multi-member cluster has no leader (and no healthy member) until a
  // quorum runs.
  const startAll = (signal?: AbortSignal) =>
    withDeadline(
      Promise.all(members.map((m) => m.start(signal))),
      options.startupTimeoutMs + 1000,
      `starting ${options.members} etcd process(es)`,
      signal,
    );
  const dispose = async () => {
    await Promise.allSettled(members.map((m) => m.kill()));
    await Promise.allSettled([rm(root, { recursive: true, force: true }), snapshots.dispose()]);
    untrackTempDir(root);
  };
  try {
    await startAll(options.signal);
    if (auth) await enableAuth(controlUrlOf(specs[0]!), auth.rootPassword);
  } catch (error) {
    await dispose();
    throw error;
  }
  options.log(
    `[leasehold/testing] etcd binary ${binary}: ${members.map((m) => m.clientUrl).join(',')}`,
  );

  const restore = async (snapshotPath: string, clusterToken = token) => {
    const etcdctl = await findEtcdctl(binary);
    if (!etcdctl) {
      throw new EtcdHarnessError(
        'ETCD_UNAVAILABLE',
        `restoring a snapshot needs etcdctl next to ${binary} or on PATH, and there is none. ` +
          'Install it with `apt-get install etcd-client`',
      );
    }
    await checkSnapshotFile(snapshotPath);
    // SIGKILL, not a graceful stop: the data is about to be replaced, and a leader stopped
    // together with its followers spends ~7 s trying to hand over leadership first.
    await Promise.all(members.map((m) => m.kill()));
    // Restore next to the data dirs first: if any restore fails, the old data is still in place.
    const staged = specs.map((spec) => `${spec.dataDir}.restore`);
    try {
      await allSettledOrThrow(
        specs.map(async (spec, i) => {
          await rm(staged[i]!, { recursive: true, force: true });
          await runEtcdctl(
            etcdctl,
            buildRestoreArgs(snapshotPath, spec, specs, clusterToken, staged[i]!),
            spec,
            options.log,
          );
        }),
      );
    } catch (error) {
      await Promise.allSettled(staged.map((dir) => rm(dir, { recursive: true, force: true })));
      throw error;
    }
    for (const [i, spec] of specs.entries()) {
      await rm(spec.dataDir, { recursive: true, force: true });
      await rename(staged[i]!, spec.dataDir);
    }
    await startAll();
  };

  return makeCluster({
    provider: 'binary',
    endpoints: members.map((m) => m.clientUrl),
    members,
    dispose,
    restore,
  });
}

/** Runs `etcdctl <args>` with a deadline; rejects with its output when it fails. */
async function runEtcdctl(
  etcdctl: string,
  args: string[],
  spec: MemberSpec,
  log: (line: string) => void,
): Promise<void> {
  const tail = new LogTail(`etcdctl ${spec.name}`, log);
  const child = spawn(etcdctl, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: etcdFreeEnv({ ETCDCTL_API: '3' }),
  });
  trackChild(child);
  child.stdout?.on('data', (chunk: Buffer) => tail.push(chunk));
  child.stderr?.on('data', (chunk: Buffer) => tail.push(chunk));
  const exited = new Promise<string | undefined>((resolve) => {
    child.once('error', (error) => resolve(`could not run ${etcdctl}: ${error.message}`));
    child.once('close', (code, signal) =>
      resolve(code === 0 ? undefined : signal ? `signal ${signal}` : `exit code ${code}`),
    );
  });
  let failure: string | undefined;
  try {
    failure = await withDeadline(
      exited,
      RESTORE_TIMEOUT_MS,
      `etcdctl snapshot restore for ${spec.name}`,
    );
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  tail.flush();
  if (failure !== undefined) {
    throw new EtcdHarnessError(
      'ETCD_SNAPSHOT_FAILED',
      `etcdctl snapshot restore for ${spec.name} failed (${failure})\n${tail.describe()}`,
    );
  }
}
