import { EtcdHarnessError } from './errors.js';

export type Testcontainers = typeof import('testcontainers');

/** The version range of the optional peer dependency, as in package.json. */
export const TESTCONTAINERS_RANGE = '~12.0.4';

export const INSTALL_TESTCONTAINERS =
  `\`pnpm add -D testcontainers@${TESTCONTAINERS_RANGE}\` ` +
  `(or \`npm install -D testcontainers@${TESTCONTAINERS_RANGE}\`)`;

/** Names the missing package and how to install it. */
export function missingTestcontainers(who: string, reason?: string): string {
  return (
    `${who} needs the optional peer dependency testcontainers (${TESTCONTAINERS_RANGE}), which cannot be imported` +
    (reason ? ` (${reason})` : '') +
    `. Install it in the package that runs the tests: ${INSTALL_TESTCONTAINERS}; ` +
    "or use provider 'binary', or 'local', which falls back to the binary without it"
  );
}

export interface TestcontainersLoader {
  /** Resolves with the module, or rejects with ETCD_UNAVAILABLE naming the package to install. */
  load(): Promise<Testcontainers>;
  /** True when the module can be imported. Never rejects. */
  available(): Promise<boolean>;
}

/**
 * Imports testcontainers at most once, on first use; the outcome, success or failure, is cached
 * for the life of the process. testcontainers reads its environment variables when it is called,
 * not when it is imported, so probing early does not get in the way of
 * `applyTestcontainersDefaults`.
 */
export function createTestcontainersLoader(
  importer: () => Promise<Testcontainers>,
): TestcontainersLoader {
  let imported: Promise<Testcontainers> | undefined;
  const load = (): Promise<Testcontainers> =>
    (imported ??= importer().catch((error: unknown) => {
      const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
      throw new EtcdHarnessError(
        'ETCD_UNAVAILABLE',
        missingTestcontainers(`provider 'container'`, reason),
        { cause: error },
      );
    }));
  return {
    load,
    available: () =>
      load().then(
        () => true,
        () => false,
      ),
  };
}

/** The process-wide loader used by the providers. */
export const testcontainers: TestcontainersLoader = createTestcontainersLoader(
  () => import('testcontainers'),
);
