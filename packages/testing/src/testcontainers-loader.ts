import { EtcdHarnessError } from './errors.js';

export type Testcontainers = typeof import('testcontainers');

/**
 * The version range of the optional peer dependency, as in package.json. 12.0.2 and later pull
 * undici 8, which needs Node 22 and throws on import on Node 20.
 */
export const TESTCONTAINERS_RANGE = '>=12.0.0 <12.0.2';

/** The version the harness is tested with. */
const TESTED = '12.0.1';

export const INSTALL_TESTCONTAINERS =
  `\`pnpm add -D testcontainers@${TESTED}\` ` + `(or \`npm install -D testcontainers@${TESTED}\`)`;

/**
 * Says why testcontainers could not be imported. A missing package gets the install line; an
 * installed one that throws on import (a version whose dependencies need a newer Node, say) gets
 * its own error first, since installing it again would not help.
 */
export function missingTestcontainers(who: string, reason?: string): string {
  const fix =
    reason === undefined || NOT_INSTALLED.test(reason)
      ? `Install it in the package that runs the tests: ${INSTALL_TESTCONTAINERS}`
      : `It is installed but throws on import: install a version in ${TESTCONTAINERS_RANGE}, ` +
        `which runs on Node ${process.versions.node} (${INSTALL_TESTCONTAINERS})`;
  return (
    `${who} needs the optional peer dependency testcontainers (${TESTCONTAINERS_RANGE}), which cannot be imported` +
    (reason ? `: ${reason}` : '') +
    `. ${fix}; ` +
    "or use provider 'binary', or 'local', which falls back to the binary without it"
  );
}

const NOT_INSTALLED = /Cannot find (package|module) 'testcontainers'/;

export interface TestcontainersLoader {
  /** Resolves with the module, or rejects with ETCD_UNAVAILABLE naming the package to install. */
  load(): Promise<Testcontainers>;
  /** Undefined when the module can be imported, else the error `load` rejects with. Never rejects. */
  failure(): Promise<EtcdHarnessError | undefined>;
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
      const reason =
        error instanceof Error
          ? `${error.name}: ${error.message.split('\n')[0] ?? ''}`
          : String(error);
      throw new EtcdHarnessError(
        'ETCD_UNAVAILABLE',
        missingTestcontainers(`provider 'container'`, reason),
        { cause: error },
      );
    }));
  return {
    load,
    failure: () =>
      load().then(
        () => undefined,
        (error: unknown) => error as EtcdHarnessError,
      ),
  };
}

/** The process-wide loader used by the providers. */
export const testcontainers: TestcontainersLoader = createTestcontainersLoader(
  () => import('testcontainers'),
);
