import { makeCluster } from './cluster.js';
import { ContainerMember } from './container-member.js';
import type { EngineLocation } from './engine.js';
import { EtcdHarnessError } from './errors.js';
import { buildEtcdArgs, clientUrlOf } from './etcd-args.js';
import { planMembers } from './plan-members.js';
import { LogTail } from './log-tail.js';
import type { ResolvedEtcdOptions } from './options.js';
import { applyTestcontainersDefaults } from './testcontainers-env.js';
import type { EtcdCluster } from './types.js';
import { withDeadline } from './wait.js';

/** Label on every container we start, besides testcontainers' own `org.testcontainers=true`. */
export const CLUSTER_LABEL = 'io.leasehold.testing.cluster';
/**
 * Set from env LEASEHOLD_TEST_RUN_ID when present, so a CI teardown can remove exactly its own
 * run's containers on a machine where other runs use the same engine.
 */
export const RUN_LABEL = 'io.leasehold.testing.run';
const ETCD_IN_IMAGE = '/usr/local/bin/etcd';
const READY_LINE = /ready to serve client requests/;

type Testcontainers = typeof import('testcontainers');

/**
 * Starts etcd containers with host networking on free loopback ports. Host networking means no
 * port mapping: the ports we pass in etcd's flags are the ports clients use, and they survive a
 * container restart (mapped ports would not).
 */
export async function startContainerCluster(
  options: ResolvedEtcdOptions,
  engine: EngineLocation,
): Promise<EtcdCluster> {
  applyTestcontainersDefaults(engine);
  const tc = await loadTestcontainers();
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

  const { token, specs } = await planMembers(options.members, (name) => `/var/lib/etcd/${name}`);
  const tails = specs.map((spec) => new LogTail(spec.name, options.log));
  const starts = specs.map((spec, i) =>
    new tc.GenericContainer(options.image)
      .withName(`${token}-${spec.name}`)
      .withLabels(labelsFor(token))
      .withNetworkMode('host')
      .withCommand([ETCD_IN_IMAGE, ...buildEtcdArgs(spec, specs, token)])
      .withPullPolicy({ shouldPull: () => false })
      // Log-based wait: exec-based strategies need a shell in the image and leave conmons behind.
      .withWaitStrategy(tc.Wait.forLogMessage(READY_LINE))
      .withStartupTimeout(options.startupTimeoutMs)
      .withLogConsumer((stream) => {
        stream.on('data', (chunk: Buffer | string) => tails[i]?.push(chunk));
      })
      .start(),
  );

  const removeAll = async () => {
    const containers = await client.container.dockerode.listContainers({
      all: true,
      filters: { label: [`${CLUSTER_LABEL}=${token}`] },
    });
    await Promise.allSettled(
      containers.map((c) => client.container.getById(c.Id).remove({ force: true, v: true })),
    );
  };

  let started;
  try {
    // All members at once: none of them reports ready until a quorum runs.
    started = await withDeadline(
      Promise.all(starts),
      options.startupTimeoutMs,
      `starting ${options.members} etcd container(s) from ${options.image}`,
      options.signal,
    );
  } catch (error) {
    // Let every start settle (each has its own startup timeout) so nothing is created after cleanup.
    await Promise.allSettled(starts);
    await removeAll().catch(() => {});
    if (options.signal?.aborted) throw error;
    const detail = tails.map((t) => t.describe()).join('\n');
    throw new EtcdHarnessError(
      'ETCD_STARTUP_FAILED',
      `etcd container(s) from ${options.image} did not become ready: ${
        error instanceof Error ? error.message : String(error)
      }\n${detail}`,
      { cause: error },
    );
  }

  const members = started.map(
    (container, i) =>
      new ContainerMember(
        specs[i]!.name,
        clientUrlOf(specs[i]!),
        client.container.getById(container.getId()),
        options.startupTimeoutMs,
      ),
  );
  const dispose = async () => {
    await Promise.allSettled(members.map((m) => m.remove()));
    await removeAll().catch(() => {});
  };
  return makeCluster(
    'container',
    members.map((m) => m.clientUrl),
    members,
    dispose,
  );
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

async function loadTestcontainers(): Promise<Testcontainers> {
  try {
    return await import('testcontainers');
  } catch (error) {
    throw new EtcdHarnessError(
      'ETCD_UNAVAILABLE',
      "provider 'container' needs the optional peer dependency testcontainers (~12.0.4): " +
        'add it to your devDependencies, or use the binary or external provider',
      { cause: error },
    );
  }
}
