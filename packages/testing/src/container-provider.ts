import { readFile } from 'node:fs/promises';
import type { ContainerRuntimeClient, StartedTestContainer } from 'testcontainers';
import { makeCluster } from './cluster.js';
import {
  ContainerMember,
  engineCall,
  ENGINE_CALL_TIMEOUT_MS,
  type DockerContainer,
} from './container-member.js';
import type { EngineLocation } from './engine.js';
import { EtcdHarnessError } from './errors.js';
import { enableAuth, rootHeaders } from './auth-setup.js';
import {
  buildEtcdArgs,
  buildRestoreArgs,
  clientUrlOf,
  controlUrlOf,
  type EtcdSecurity,
  type MemberSpec,
} from './etcd-args.js';
import { waitHealthy } from './health.js';
import { LogTail } from './log-tail.js';
import type { ResolvedEtcdOptions } from './options.js';
import { planMembers } from './plan-members.js';
import { checkSnapshotFile, SnapshotFiles } from './snapshot.js';
import { tarOneFile } from './tar.js';
import { testcontainers, type Testcontainers } from './testcontainers-loader.js';
import { applyTestcontainersDefaults } from './testcontainers-env.js';
import type { EtcdCluster } from './types.js';
import { allSettledOrThrow, withDeadline } from './wait.js';

/** Label on every container and volume we create, besides `org.testcontainers=true`. */
export const CLUSTER_LABEL = 'io.leasehold.testing.cluster';
/**
 * Set from env LEASEHOLD_TEST_RUN_ID when present, so a CI teardown can remove exactly its own
 * run's containers on a machine where other runs use the same engine.
 */
export const RUN_LABEL = 'io.leasehold.testing.run';
/** testcontainers' own label; CI teardowns remove what carries it. */
const TESTCONTAINERS_LABEL = 'org.testcontainers';
const ETCD_IN_IMAGE = '/usr/local/bin/etcd';
const ETCDCTL_IN_IMAGE = '/usr/local/bin/etcdctl';
/** Each member's volume is mounted here; its data dir is `<DATA_MOUNT>/<name>`. */
const DATA_MOUNT = '/var/lib/etcd';
const SNAPSHOT_IN_HELPER = 'leasehold-restore.db';
/** Where a member's copies of the TLS files live in its container. */
const TLS_IN_CONTAINER = '/etc/leasehold-tls';
const READY_LINE = /ready to serve client requests/;
/** Deadline for one restore helper container to run `etcdctl snapshot restore`. */
const RESTORE_TIMEOUT_MS = 30_000;

type Docker = ContainerRuntimeClient['container']['dockerode'];

/**
 * Starts etcd containers with host networking on free loopback ports. Host networking means no
 * port mapping: the ports we pass in etcd's flags are the ports clients use, and they survive a
 * container restart (mapped ports would not). Each member keeps its data in a named volume of
 * its own, so a restore can rebuild the data without a shell in the image.
 */
export async function startContainerCluster(
  options: ResolvedEtcdOptions,
  engine: EngineLocation,
): Promise<EtcdCluster> {
  applyTestcontainersDefaults(engine);
  const tc = await testcontainers.load();
  const client = await withDeadline(
    tc.getContainerRuntimeClient(),
    options.startupTimeoutMs,
    `connecting to the container engine at ${process.env.DOCKER_HOST ?? engine.dockerHost}`,
    options.signal,
  );
  // Never pull: CI has no registry access, and a silent multi-minute pull is worse than a clear error.
  if (!(await client.image.exists(tc.ImageName.fromString(options.image)))) {
    throw new EtcdHarnessError(
      'ETCD_UNAVAILABLE',
      `etcd image "${options.image}" is not present in the container engine, and the harness never pulls. ` +
        `Pull it yourself (\`docker pull ${options.image}\`), build and tag it locally (.ci/setup-podman-etcd.sh), ` +
        'or point LEASEHOLD_ETCD_IMAGE at an image you have',
    );
  }

  const { token, specs } = await planMembers(
    options.members,
    (name) => `${DATA_MOUNT}/${name}`,
    options.tls !== undefined,
  );
  const { auth } = options;
  const control = (spec: MemberSpec) => ({
    url: controlUrlOf(spec),
    // Root's token, from the member itself: a snapshot must not depend on another member.
    headers: async () => (auth ? rootHeaders(controlUrlOf(spec), auth.rootPassword) : {}),
  });
  const docker = client.container.dockerode;
  const labels = labelsFor(token);
  const ownedLabels = { ...labels, [TESTCONTAINERS_LABEL]: 'true' };
  const tails = specs.map((spec) => new LogTail(spec.name, options.log));
  const snapshots = new SnapshotFiles();
  // A restore moves every member to fresh volumes: generation n uses `<token>-<name>-<n>`.
  let generation = 0;
  const volumesOf = (gen: number) => specs.map((spec) => `${token}-${spec.name}-${gen}`);

  const createVolumes = (gen: number) =>
    Promise.all(
      volumesOf(gen).map((name) =>
        engineCall(`create volume ${name}`, () =>
          docker.createVolume({ Name: name, Labels: ownedLabels }),
        ),
      ),
    );

  const removeVolumes = (names: string[]) =>
    Promise.allSettled(
      names.map((name) =>
        engineCall(`remove volume ${name}`, () => docker.getVolume(name).remove(), [404]),
      ),
    );

  /** Removes every container, then every volume, with this cluster's label. */
  const removeAll = async () => {
    const filters = { label: [`${CLUSTER_LABEL}=${token}`] };
    const containers =
      (await engineCall('list containers', () => docker.listContainers({ all: true, filters }))) ??
      [];
    await Promise.allSettled(
      containers.map((c) =>
        engineCall(
          `remove container ${c.Id.slice(0, 12)}`,
          () => docker.getContainer(c.Id).remove({ force: true, v: true }),
          [404, 409],
        ),
      ),
    );
    const volumes = (await engineCall('list volumes', () => docker.listVolumes({ filters })))
      ?.Volumes;
    await removeVolumes((volumes ?? []).map((v) => v.Name));
  };

  /** Starts one container per member on generation `gen`'s volumes; all at once. */
  const launch = async (gen: number, signal?: AbortSignal): Promise<DockerContainer[]> => {
    const volumes = volumesOf(gen);
    const starts = specs.map((spec, i) =>
      memberContainer(tc, options, spec, specs, token, labels, volumes[i]!, tails[i]!).start(),
    );
    try {
      // None of them reports ready until a quorum runs.
      const started: StartedTestContainer[] = await withDeadline(
        Promise.all(starts),
        options.startupTimeoutMs,
        `starting ${options.members} etcd container(s) from ${options.image}`,
        signal,
      );
      return started.map((c) => client.container.getById(c.getId()));
    } catch (error) {
      // Let every start settle (each has its own startup timeout) so nothing is created after
      // the caller cleans up.
      await Promise.allSettled(starts);
      if (signal?.aborted) throw error;
      throw new EtcdHarnessError(
        'ETCD_STARTUP_FAILED',
        `etcd container(s) from ${options.image} did not become ready: ${
          error instanceof Error ? error.message : String(error)
        }\n${tails.map((t) => t.describe()).join('\n')}`,
        { cause: error },
      );
    }
  };

  let containers: DockerContainer[];
  try {
    await createVolumes(generation);
    containers = await launch(generation, options.signal);
    if (auth) await enableAuth(controlUrlOf(specs[0]!), auth.rootPassword);
  } catch (error) {
    await removeAll().catch(() => {});
    throw error;
  }

  const members = specs.map(
    (spec, i) =>
      new ContainerMember(
        spec.name,
        clientUrlOf(spec),
        containers[i]!,
        options.startupTimeoutMs,
        snapshots,
        control(spec),
      ),
  );

  const restore = async (snapshotPath: string, clusterToken = token) => {
    await checkSnapshotFile(snapshotPath);
    const archive = tarOneFile(SNAPSHOT_IN_HELPER, await readFile(snapshotPath));
    const next = generation + 1;
    // SIGKILL, not a graceful stop: the data is about to be replaced, and a leader stopped
    // together with its followers spends ~7 s trying to hand over leadership first.
    await Promise.all(members.map((m) => m.kill()));
    // Restore into new volumes while the old containers and volumes stay as they were: if a
    // restore fails, the members are stopped with their old data and `start()` brings them back.
    await createVolumes(next);
    try {
      await allSettledOrThrow(
        specs.map((spec, i) =>
          runRestoreHelper(
            docker,
            options,
            archive,
            buildRestoreArgs(`/${SNAPSHOT_IN_HELPER}`, spec, specs, clusterToken, spec.dataDir),
            volumesOf(next)[i]!,
            ownedLabels,
          ),
        ),
      );
    } catch (error) {
      await removeVolumes(volumesOf(next));
      throw error;
    }
    // Same names, ports and URLs, new containers on the restored volumes.
    await Promise.all(members.map((m) => m.remove()));
    const previous = volumesOf(generation);
    generation = next;
    const replaced = await launch(next);
    replaced.forEach((container, i) => members[i]!.replaceContainer(container));
    await removeVolumes(previous);
    await Promise.all(
      specs.map((spec) =>
        waitHealthy(controlUrlOf(spec), { deadlineMs: options.startupTimeoutMs }),
      ),
    );
  };

  const dispose = async () => {
    await Promise.allSettled(members.map((m) => m.remove()));
    await Promise.allSettled([removeAll(), snapshots.dispose()]);
  };
  return makeCluster({
    provider: 'container',
    endpoints: members.map((m) => m.clientUrl),
    members,
    dispose,
    restore,
  });
}

function memberContainer(
  tc: Testcontainers,
  options: ResolvedEtcdOptions,
  spec: MemberSpec,
  specs: MemberSpec[],
  token: string,
  labels: Record<string, string>,
  volume: string,
  tail: LogTail,
) {
  const { tls, auth } = options;
  const inContainer = (name: string) => `${TLS_IN_CONTAINER}/${name}`;
  const security: EtcdSecurity = {
    auth,
    tls: tls && {
      certFile: inContainer('server.crt'),
      keyFile: inContainer('server.key'),
      clientCaFile: tls.clientCaFile && inContainer('client-ca.crt'),
    },
  };
  // Copied in before the container starts (an archive upload): no bind mount of a host path.
  const files = tls
    ? [
        { source: tls.certFile, target: inContainer('server.crt') },
        { source: tls.keyFile, target: inContainer('server.key') },
        ...(tls.clientCaFile
          ? [{ source: tls.clientCaFile, target: inContainer('client-ca.crt') }]
          : []),
      ]
    : [];
  return (
    new tc.GenericContainer(options.image)
      .withCopyFilesToContainer(files)
      .withName(`${token}-${spec.name}`)
      .withLabels(labels)
      .withNetworkMode('host')
      // A bind source that is a name, not a path, mounts the named volume.
      .withBindMounts([{ source: volume, target: DATA_MOUNT }])
      .withCommand([ETCD_IN_IMAGE, ...buildEtcdArgs(spec, specs, token, security)])
      .withPullPolicy({ shouldPull: () => false })
      // Log-based wait: exec-based strategies need a shell in the image and leave conmons behind.
      .withWaitStrategy(tc.Wait.forLogMessage(READY_LINE))
      .withStartupTimeout(options.startupTimeoutMs)
      .withLogConsumer((stream) => {
        stream.on('data', (chunk: Buffer | string) => tail.push(chunk));
      })
  );
}

/**
 * Runs the image's etcdctl in a short-lived container with the member's new volume mounted and
 * the snapshot copied in (the engine API's archive upload, so no bind mount of a host path and no
 * shell is needed), waits for it to exit, and removes it.
 */
async function runRestoreHelper(
  docker: Docker,
  options: ResolvedEtcdOptions,
  archive: Buffer,
  restoreArgs: string[],
  volume: string,
  labels: Record<string, string>,
): Promise<void> {
  const what = `etcdctl snapshot restore into volume ${volume}`;
  const container = await engineCall(`create a container for ${what}`, () =>
    docker.createContainer({
      Image: options.image,
      Cmd: [ETCDCTL_IN_IMAGE, ...restoreArgs],
      Env: ['ETCDCTL_API=3'],
      Labels: labels,
      // A TTY makes the logs plain text (no stream multiplexing headers).
      Tty: true,
      HostConfig: { Binds: [`${volume}:${DATA_MOUNT}`], NetworkMode: 'none' },
    }),
  );
  if (!container) throw new EtcdHarnessError('ETCD_ENGINE_ERROR', `could not create ${what}`);
  try {
    await engineCall(`copy the snapshot for ${what}`, () =>
      container.putArchive(archive, { path: '/' }),
    );
    await engineCall(`start ${what}`, () => container.start());
    const exit = (await withDeadline(
      container.wait() as Promise<{ StatusCode: number }>,
      RESTORE_TIMEOUT_MS,
      what,
    )) ?? { StatusCode: -1 };
    const output = await engineCall(`read the output of ${what}`, () =>
      container.logs({ stdout: true, stderr: true, follow: false }),
    ).catch(() => undefined);
    const restoreTail = new LogTail(`etcdctl ${volume}`, options.log);
    if (output) restoreTail.push(Buffer.isBuffer(output) ? output : String(output));
    restoreTail.flush();
    if (exit.StatusCode !== 0) {
      throw new EtcdHarnessError(
        'ETCD_SNAPSHOT_FAILED',
        `${what} failed (exit code ${exit.StatusCode}) in image ${options.image}\n${restoreTail.describe()}`,
      );
    }
  } finally {
    await withDeadline(
      container.remove({ force: true, v: true }),
      ENGINE_CALL_TIMEOUT_MS,
      `remove ${what}`,
    ).catch(() => {});
  }
}

export function labelsFor(
  clusterToken: string,
  env: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const runId = env.LEASEHOLD_TEST_RUN_ID?.trim();
  return runId
    ? { [CLUSTER_LABEL]: clusterToken, [RUN_LABEL]: runId }
    : { [CLUSTER_LABEL]: clusterToken };
}
