// Connects with one option set to a huge (finite, positive) duration and takes a lock.
// Prints 'invalid <message>' if the call rejects it with InvalidArgumentError, 'acquired' if it
// works, 'rejected <name>' for any other rejection; a crash shows as a non-zero exit.
import { connect, isInvalidArgumentError } from '@leasehold/core';

const [endpoints, option, value, lockPrefix] = process.argv.slice(2);
try {
  const client = await connect({
    endpoints: endpoints.split(','),
    lockPrefix,
    [option]: Number(value),
  });
  try {
    const lock = await client.acquire('huge');
    await lock.release();
    console.log('acquired');
  } finally {
    await client.close();
  }
} catch (err) {
  console.log(isInvalidArgumentError(err) ? `invalid ${err.message}` : `rejected ${err.name}`);
}
