import { findEngine, type EngineLocation } from './engine.js';
import { EtcdHarnessError } from './errors.js';
import { findEtcdBinary } from './find-binary.js';
import { parseEndpoints, resolveOptions } from './options.js';
import { testcontainers } from './testcontainers-loader.js';
import type { EtcdProviderChoice, EtcdProviderName, StartEtcdOptions } from './types.js';

/** What the machine offers; each probe runs only when the selection gets to it. */
export interface ProviderProbes {
  endpoints(): string[];
  engine(): Promise<EngineLocation | undefined>;
  /** Undefined when the optional peer `testcontainers` can be imported, else why not. */
  testcontainers(): Promise<Error | undefined>;
  binary(): Promise<string | undefined>;
}

export const HOW_TO_GET_ETCD = [
  'set ETCD_ENDPOINTS=http://127.0.0.1:2379 (comma-separated) to use an etcd you run yourself',
  "start Docker, or Podman's API socket (`podman system service --time=0 unix:///run/podman/podman.sock &`), make the etcd image available locally, and install testcontainers",
  'install an etcd binary (`apt-get install etcd-server`, or set ETCD_BIN=/path/to/etcd)',
];

const START_ENGINE =
  "Start Docker, or Podman's socket: `podman system service --time=0 unix:///run/podman/podman.sock &` " +
  'and export DOCKER_HOST=unix:///run/podman/podman.sock';

type ContainerSupport = 'ok' | 'no-engine' | Error;

/**
 * The container provider needs both an engine that answers and an importable testcontainers;
 * when the import fails, its error (with the real one as cause).
 */
async function containerSupport(probes: ProviderProbes): Promise<ContainerSupport> {
  if (!(await probes.engine())) return 'no-engine';
  return (await probes.testcontainers()) ?? 'ok';
}

/**
 * Picks the provider:
 * - 'auto': ETCD_ENDPOINTS → 'external'; else a container engine answering /_ping *and* an
 *   importable testcontainers → 'container'; else an etcd binary → 'binary'.
 * - 'local': like 'auto' without the first step: a cluster of the test's own, never 'external'.
 * - 'external', 'container', 'binary': checked, never replaced by another provider.
 * `note` hears why 'auto' or 'local' passed over the container provider when an engine answered
 * but testcontainers failed to import: that fallback is never silent.
 */
export async function selectProvider(
  requested: EtcdProviderChoice,
  probes: ProviderProbes,
  binaryHint = 'ETCD_BIN is not executable or `etcd` is not on PATH',
  note: (line: string) => void = () => {},
): Promise<EtcdProviderName> {
  switch (requested) {
    case 'external':
      if (probes.endpoints().length > 0) return 'external';
      throw unavailable(
        "provider 'external' needs ETCD_ENDPOINTS (comma-separated client URLs), which is unset or empty",
      );
    case 'container': {
      const support = await containerSupport(probes);
      if (support === 'ok') return 'container';
      if (support === 'no-engine') {
        throw unavailable(
          "provider 'container' needs a container engine, but none answered /_ping " +
            '(checked DOCKER_HOST, else /var/run/docker.sock and /run/podman/podman.sock). ' +
            START_ENGINE,
        );
      }
      throw support;
    }
    case 'binary':
      if (await probes.binary()) return 'binary';
      throw unavailable(
        `provider 'binary' needs an etcd executable, but ${binaryHint}. ` +
          'Install one with `apt-get install etcd-server` or set ETCD_BIN=/path/to/etcd',
      );
    case 'auto':
    case 'local': {
      if (requested === 'auto' && probes.endpoints().length > 0) return 'external';
      const support = await containerSupport(probes);
      if (support === 'ok') return 'container';
      const engineNote =
        support instanceof Error
          ? `a container engine answered, but ${support.message}`
          : 'no container engine answered /_ping';
      if (await probes.binary()) {
        if (support instanceof Error)
          note(`provider '${requested}' uses the etcd binary: ${engineNote}`);
        return 'binary';
      }
      if (requested === 'local') {
        throw unavailable(
          `provider 'local' starts etcd itself (ETCD_ENDPOINTS is not used), but ${engineNote}, ` +
            `and ${binaryHint}. Either of these fixes it:\n` +
            HOW_TO_GET_ETCD.slice(1)
              .map((line) => `  - ${line}`)
              .join('\n'),
          support instanceof Error ? support.cause : undefined,
        );
      }
      throw unavailable(
        `no etcd available for tests: ETCD_ENDPOINTS is unset, ${engineNote}, ` +
          'and no etcd binary was found. Any one of these fixes it:\n' +
          HOW_TO_GET_ETCD.map((line) => `  - ${line}`).join('\n'),
        support instanceof Error ? support.cause : undefined,
      );
    }
  }
}

/** Probes backed by the real environment. */
export function systemProbes(
  binary: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): ProviderProbes {
  return {
    endpoints: () => parseEndpoints(env.ETCD_ENDPOINTS),
    engine: () => findEngine(env),
    testcontainers: () => testcontainers.failure(),
    binary: () => findEtcdBinary(binary, env),
  };
}

/**
 * The provider `startEtcd` would use with these options ('auto' and 'local' resolved).
 *
 * @throws {@link EtcdHarnessError} (`ETCD_INVALID_OPTION`, `ETCD_UNAVAILABLE`) as {@link startEtcd}
 *   would, without starting anything.
 */
export async function resolveEtcdProvider(
  options: Pick<StartEtcdOptions, 'provider' | 'binary'> = {},
): Promise<EtcdProviderName> {
  const resolved = resolveOptions(options);
  return selectProvider(
    resolved.provider,
    systemProbes(resolved.binary),
    binaryHint(resolved.binary),
  );
}

/** Says which binary was looked for, for the "not found" message. */
export function binaryHint(binary: string | undefined): string {
  return binary === undefined
    ? '`etcd` is not on PATH'
    : `"${binary}" (from the binary option or ETCD_BIN) is not an executable file or on PATH`;
}

function unavailable(message: string, cause?: unknown): EtcdHarnessError {
  return new EtcdHarnessError(
    'ETCD_UNAVAILABLE',
    message,
    cause === undefined ? undefined : { cause },
  );
}
