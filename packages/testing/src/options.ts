import { EtcdHarnessError } from './errors.js';
import type { EtcdProviderChoice, StartEtcdOptions } from './types.js';

/** The upstream image; CI tags a locally built image with this name so nothing is pulled. */
export const DEFAULT_ETCD_IMAGE = 'quay.io/coreos/etcd:v3.4.23';
export const DEFAULT_STARTUP_TIMEOUT_MS = 30_000;

const PROVIDERS: readonly string[] = ['external', 'container', 'binary', 'auto', 'local'];

export interface ResolvedEtcdOptions {
  members: 1 | 3;
  provider: EtcdProviderChoice;
  image: string;
  /** Undefined means "look for `etcd` on PATH". */
  binary: string | undefined;
  startupTimeoutMs: number;
  signal: AbortSignal | undefined;
  log: (line: string) => void;
}

/** Applies defaults (options first, then env, then built-ins) and rejects invalid values. */
export function resolveOptions(
  options: StartEtcdOptions = {},
  env: NodeJS.ProcessEnv = process.env,
): ResolvedEtcdOptions {
  const members = options.members ?? 1;
  if (members !== 1 && members !== 3) {
    throw new EtcdHarnessError(
      'ETCD_INVALID_OPTION',
      `members must be 1 or 3, got ${String(members)}`,
    );
  }
  const provider = options.provider ?? nonEmpty(env.LEASEHOLD_ETCD_PROVIDER) ?? 'auto';
  if (!PROVIDERS.includes(provider)) {
    throw new EtcdHarnessError(
      'ETCD_INVALID_OPTION',
      `provider must be one of ${PROVIDERS.join(', ')}, got "${provider}"` +
        (options.provider === undefined ? ' (from LEASEHOLD_ETCD_PROVIDER)' : ''),
    );
  }
  const startupTimeoutMs = options.startupTimeoutMs ?? DEFAULT_STARTUP_TIMEOUT_MS;
  if (!Number.isFinite(startupTimeoutMs) || startupTimeoutMs <= 0) {
    throw new EtcdHarnessError(
      'ETCD_INVALID_OPTION',
      `startupTimeoutMs must be a positive number of milliseconds, got ${String(startupTimeoutMs)}`,
    );
  }
  return {
    members,
    provider: provider as EtcdProviderChoice,
    image: options.image ?? nonEmpty(env.LEASEHOLD_ETCD_IMAGE) ?? DEFAULT_ETCD_IMAGE,
    binary: options.binary ?? nonEmpty(env.ETCD_BIN),
    startupTimeoutMs,
    signal: options.signal,
    log: options.log ?? (() => {}),
  };
}

/** `ETCD_ENDPOINTS` as a list; empty when unset. Accepts `host:port` and adds `http://`. */
export function parseEndpoints(value: string | undefined): string[] {
  if (value === undefined) return [];
  return value
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0)
    .map((entry) => (/^[a-z]+:\/\//i.test(entry) ? entry : `http://${entry}`));
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}
