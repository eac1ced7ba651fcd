import { EtcdHarnessError } from './errors.js';
import { kindOf, unknownKey } from './known-keys.js';
import type {
  EtcdAuthOptions,
  EtcdProviderChoice,
  EtcdTlsOptions,
  StartEtcdOptions,
} from './types.js';

/** The upstream image; CI tags a locally built image with this name so nothing is pulled. */
export const DEFAULT_ETCD_IMAGE = 'quay.io/coreos/etcd:v3.4.23';
export const DEFAULT_STARTUP_TIMEOUT_MS = 30_000;

const PROVIDERS: readonly string[] = ['external', 'container', 'binary', 'auto', 'local'];
const OPTION_NAMES: readonly (keyof StartEtcdOptions)[] = [
  'members',
  'provider',
  'image',
  'binary',
  'startupTimeoutMs',
  'signal',
  'log',
  'tls',
  'auth',
];

function knownKeys(name: string, value: object, allowed: readonly string[]): void {
  const message = unknownKey(name, value, allowed);
  if (message) throw new EtcdHarnessError('ETCD_INVALID_OPTION', message);
}

export interface ResolvedEtcdOptions {
  members: 1 | 3;
  provider: EtcdProviderChoice;
  image: string;
  /** Undefined means "look for `etcd` on PATH". */
  binary: string | undefined;
  startupTimeoutMs: number;
  signal: AbortSignal | undefined;
  log: (line: string) => void;
  tls: EtcdTlsOptions | undefined;
  auth: EtcdAuthOptions | undefined;
}

/** Applies defaults (options first, then env, then built-ins) and rejects invalid values. */
export function resolveOptions(
  options: StartEtcdOptions = {},
  env: NodeJS.ProcessEnv = process.env,
): ResolvedEtcdOptions {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new EtcdHarnessError(
      'ETCD_INVALID_OPTION',
      `startEtcd options must be an object such as { members: 3 }, got ${JSON.stringify(options) ?? String(options)}`,
    );
  }
  knownKeys('options', options, OPTION_NAMES);
  const members = options.members ?? 1;
  if (members !== 1 && members !== 3) {
    throw new EtcdHarnessError(
      'ETCD_INVALID_OPTION',
      `members must be 1 or 3, got ${JSON.stringify(members) ?? String(members)}`,
    );
  }
  let provider = options.provider ?? nonEmpty(env.LEASEHOLD_ETCD_PROVIDER) ?? 'auto';
  if (!PROVIDERS.includes(provider)) {
    throw new EtcdHarnessError(
      'ETCD_INVALID_OPTION',
      `provider must be one of ${PROVIDERS.join(', ')}, got "${provider}"` +
        (options.provider === undefined ? ' (from LEASEHOLD_ETCD_PROVIDER)' : ''),
    );
  }
  const tls = resolveTls(options.tls);
  const auth = resolveAuth(options.auth);
  if (tls || auth) {
    const what = tls ? 'tls' : 'auth';
    if (provider === 'external') {
      throw new EtcdHarnessError(
        'ETCD_INVALID_OPTION',
        `${what} needs an etcd the harness starts itself, but provider is 'external'` +
          (options.provider === undefined ? ' (from LEASEHOLD_ETCD_PROVIDER)' : '') +
          "; use provider 'local' (or 'binary' / 'container')",
      );
    }
    // ETCD_ENDPOINTS names someone else's etcd, configured without these settings.
    if (provider === 'auto') provider = 'local';
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
    tls,
    auth,
  };
}

function resolveTls(tls: EtcdTlsOptions | undefined): EtcdTlsOptions | undefined {
  if (tls === undefined) return undefined;
  const path = (v: unknown) => typeof v === 'string' && v.trim() !== '';
  if (
    typeof tls !== 'object' ||
    tls === null ||
    !path(tls.certFile) ||
    !path(tls.keyFile) ||
    !(tls.clientCaFile === undefined || path(tls.clientCaFile))
  ) {
    throw new EtcdHarnessError(
      'ETCD_INVALID_OPTION',
      `tls must be { certFile, keyFile, clientCaFile? } with non-empty file paths, got ${JSON.stringify(tls) ?? kindOf(tls)}`,
    );
  }
  knownKeys('tls', tls, ['certFile', 'keyFile', 'clientCaFile'] satisfies (keyof EtcdTlsOptions)[]);
  return { ...tls };
}

function resolveAuth(auth: EtcdAuthOptions | undefined): EtcdAuthOptions | undefined {
  if (auth === undefined) return undefined;
  const ttl = auth?.tokenTtlSeconds;
  if (
    typeof auth !== 'object' ||
    auth === null ||
    typeof auth.rootPassword !== 'string' ||
    auth.rootPassword === '' ||
    !(ttl === undefined || (Number.isInteger(ttl) && ttl >= 1))
  ) {
    throw new EtcdHarnessError(
      'ETCD_INVALID_OPTION',
      'auth must be { rootPassword: non-empty string, tokenTtlSeconds?: whole number >= 1 }, got ' +
        (auth === null || typeof auth !== 'object'
          ? kindOf(auth)
          : `an object with ${Object.keys(auth).join(', ') || 'no keys'}`),
    );
  }
  knownKeys('auth', auth, ['rootPassword', 'tokenTtlSeconds'] satisfies (keyof EtcdAuthOptions)[]);
  return { ...auth };
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
