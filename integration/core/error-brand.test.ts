/**
 * "one InvalidArgumentError brand across packages": core's errors.ts and fence's
 * README say every leasehold package's bad-input error (core's, fence's, cron's) carries the
 * brand `Symbol.for('leasehold.invalid-argument')`, so any package's isInvalidArgumentError
 * answers for all of them. @leasehold/cron's does not carry it.
 */
import { isInvalidArgumentError } from '@leasehold/core';
import {
  createScheduler,
  isInvalidArgumentError as cronIsInvalidArgumentError,
} from '@leasehold/cron';
import { isInvalidArgumentError as fenceIsInvalidArgumentError } from '@leasehold/fence';
import { InvalidArgumentError as CoreInvalidArgumentError } from '@leasehold/core';
import { expect, it } from 'vitest';

it("cron's bad-input error answers to core's and fence's guards, and core's to cron's", async () => {
  const err = await createScheduler({} as never).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(cronIsInvalidArgumentError(err)).toBe(true); // the error is cron's own
  expect({
    core: isInvalidArgumentError(err),
    fence: fenceIsInvalidArgumentError(err),
    cronOnCore: cronIsInvalidArgumentError(new CoreInvalidArgumentError('x')),
  }).toEqual({ core: true, fence: true, cronOnCore: true });
});
