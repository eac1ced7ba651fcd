import {
  invalid as coreInvalid,
  invalidSecret as coreInvalidSecret,
} from '@leasehold/core/internal';

/**
 * Core's bad-input error (`InvalidArgumentError`, code `INVALID_ARGUMENT`): the message names the
 * value and what is allowed, like every other leasehold package's.
 */
export const invalid = (name: string, allowed: string, value: unknown): Error =>
  coreInvalid(name, allowed, value);

/** {@link invalid} for a value that may be a secret: the message names only its type. */
export const invalidSecret = (name: string, allowed: string, value: unknown): Error =>
  coreInvalidSecret(name, allowed, value);
