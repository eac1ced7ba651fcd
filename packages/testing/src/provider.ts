import { findEngine, type EngineLocation } from './engine.js';
import { EtcdHarnessError } from './errors.js';
import { findEtcdBinary } from './find-binary.js';
import { parseEndpoints, resolveOptions } from './options.js';
import type { EtcdProviderName, StartEtcdOptions } from './types.js';

/** What the machine offers; each probe runs only when the selection gets to it. */
export interface ProviderProbes {
  endpoints(): string[];
  engine(): Promise<EngineLocation | undefined>;
  binary(): Promise<string | undefined>;
}

export const HOW_TO_GET_ETCD = [
  'set ETCD_ENDPOINTS=http://127.0.0.1:2379 (comma-separated) to use an etcd you run yourself',
  "start Docker, or Podman's API socket (`podman system service --time=0 unix:///run/podman/podman.sock &`), and make the etcd image available locally",
  'install an etcd binary (`apt-get install etcd-server`, or set ETCD_BIN=/path/to/etcd)',
];

/**
 * Picks the provider. 'auto' means: ETCD_ENDPOINTS → 'external'; a container engine answering
 * /_ping → 'container'; an etcd binary → 'binary'. An explicit choice is checked, never replaced.
 */
export async function selectProvider(
  requested: EtcdProviderName | 'auto',
  probes: ProviderProbes,
  binaryHint = 'ETCD_BIN is not executable or `etcd` is not on PATH',
): Promise<EtcdProviderName> {
  switch (requested) {
    case 'external':
      if (probes.endpoints().length > 0) return 'external';
      throw unavailable(
        "provider 'external' needs ETCD_ENDPOINTS (comma-separated client URLs), which is unset or empty",
      );
    case 'container':
      if (await probes.engine()) return 'container';
      throw unavailable(
        "provider 'container' needs a container engine, but none answered /_ping " +
          '(checked DOCKER_HOST, else /var/run/docker.sock and /run/podman/podman.sock). ' +
          "Start Docker, or Podman's socket: `podman system service --time=0 unix:///run/podman/podman.sock &` " +
          'and export DOCKER_HOST=unix:///run/podman/podman.sock',
      );
    case 'binary':
      if (await probes.binary()) return 'binary';
      throw unavailable(
        `provider 'binary' needs an etcd executable, but ${binaryHint}. ` +
          'Install one with `apt-get install etcd-server` or set ETCD_BIN=/path/to/etcd',
      );
    case 'auto':
      if (probes.endpoints().length > 0) return 'external';
      if (await probes.engine()) return 'container';
      if (await probes.binary()) return 'binary';
      throw unavailable(
        'no etcd available for tests: ETCD_ENDPOINTS is unset, no container engine answered /_ping, ' +
          'and no etcd binary was found. Any one of these fixes it:\n' +
          HOW_TO_GET_ETCD.map((line) => `  - ${line}`).join('\n'),
      );
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
    binary: () => findEtcdBinary(binary, env),
  };
}

/** The provider `startEtcd` would use with these options ('auto' resolved). */
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

function unavailable(message: string): EtcdHarnessError {
  return new EtcdHarnessError('ETCD_UNAVAILABLE', message);
}
