/**
 * The one error class of this package. `code` tells failures apart without parsing messages;
 * messages say what went wrong and how to fix it.
 */
export type EtcdHarnessErrorCode =
  | 'ETCD_UNAVAILABLE' // no provider could be used, or the requested one is missing
  | 'ETCD_INVALID_OPTION' // an option or env value is not allowed
  | 'ETCD_STARTUP_FAILED' // etcd exited or reported an error while starting
  | 'ETCD_ENGINE_ERROR' // the container engine refused a call
  | 'ETCD_SNAPSHOT_FAILED' // saving or restoring a snapshot failed
  | 'ETCD_TIMEOUT'; // a wait ran past its deadline

/**
 * What every failure of this package throws: `code` tells failures apart without parsing the
 * message (see {@link EtcdHarnessErrorCode}); the message says what went wrong and how to fix it.
 * Test for it with {@link isEtcdHarnessError}.
 */
export class EtcdHarnessError extends Error {
  /** Always `'EtcdHarnessError'`: what {@link isEtcdHarnessError} checks. */
  override readonly name = 'EtcdHarnessError';
  /** Which failure this is. */
  readonly code: EtcdHarnessErrorCode;

  /** Made by the harness where the failure happens; exported for `instanceof` and tests. */
  constructor(code: EtcdHarnessErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** Duck-typed so it survives two copies of this package in one process. */
export function isEtcdHarnessError(value: unknown): value is EtcdHarnessError {
  return (
    value instanceof Error &&
    value.name === 'EtcdHarnessError' &&
    typeof (value as { code?: unknown }).code === 'string'
  );
}
