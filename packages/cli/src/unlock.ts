/**
 * `leasehold unlock NAME --key KEY`: removes one stuck key from a lock's queue, for an operator
 * who knows its holder is gone for good (a key written without a lease, or with a lease of a
 * very long TTL, never expires on its own).
 *
 * The delete is a transaction guarded by the create revision read first, so if the key was
 * released and created again (a new holder, a new token) in between, nothing is removed. The
 * key's lease is left alone: it may carry other keys of the same process.
 */
import { createInterface } from 'node:readline/promises';
import type { Leasehold } from '@leasehold/core';
import { kvCall } from '@leasehold/core/internal';
import { connectWith, type ConnectionFlags } from './connection.js';
import { CliError, exitCodes, usageError } from './exit-codes.js';
import { printable, quotedValue } from './format.js';
import { leaseHex, queueRange } from './keys.js';
import { inQueueOrder, readPrefix, type Entry } from './read.js';
import { Signals } from './signals.js';

export interface UnlockFlags extends ConnectionFlags {
  key: string;
  yes?: boolean;
}

/** The full key for `--key`: a key of the lock's queue, or just its lease id in hex. */
export function resolveKey(lockPrefix: string, name: string, key: string): string {
  const range = queueRange(lockPrefix, name);
  if (/^[0-9a-f]{1,16}$/.test(key)) return `${range}${key}`;
  if (key.startsWith(range) && /^[0-9a-f]{1,16}$/.test(key.slice(range.length))) return key;
  throw usageError(
    `--key ${JSON.stringify(key)} is not a key of lock ${JSON.stringify(name)}: expected ${range}<lease id in hex>, or the lease id alone (leasehold inspect lists them)`,
  );
}

/** Where the key stands in its queue, in words. */
export function placeOf(entry: Entry, queue: readonly Entry[]): string {
  const index = inQueueOrder([...queue]).findIndex((e) => e.key === entry.key);
  return index <= 0 ? 'the holder' : `waiter #${index}`;
}

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  // The terminal is in raw mode while asking: Ctrl-C arrives here, not as a signal.
  const cancel = new AbortController();
  rl.on('SIGINT', () => cancel.abort());
  try {
    const answer = await rl.question(question, { signal: cancel.signal });
    return /^y(es)?$/i.test(answer.trim());
  } catch {
    process.stderr.write('\n');
    return false;
  } finally {
    rl.close();
  }
}

async function readKey(client: Leasehold, key: string): Promise<Entry | undefined> {
  const res = await kvCall(
    client,
    'range',
    (kv, options) => kv.range({ key: Buffer.from(key) }, options),
    { idempotent: true },
  );
  const kv = res.kvs[0];
  return (
    kv && {
      key,
      value: kv.value.toString(),
      token: BigInt(kv.create_revision),
      leaseId: BigInt(kv.lease),
    }
  );
}

export async function unlock(
  name: string,
  flags: UnlockFlags,
  write: (text: string) => Promise<void>,
): Promise<number> {
  const interactive = process.stdin.isTTY === true && process.stderr.isTTY === true;
  if (!flags.yes && !interactive) {
    throw usageError('unlock deletes a key: pass --yes to confirm when stdin is not a terminal');
  }
  using signals = new Signals({ ignoreStop: false });
  const client = await connectWith(flags, { signal: signals.interrupted });
  try {
    const key = resolveKey(client.lockPrefix, name, flags.key);
    const entry = await readKey(client, key);
    if (entry === undefined) {
      throw new CliError(
        `no key ${key} (lock ${JSON.stringify(name)}): nothing removed`,
        exitCodes.notFound,
      );
    }
    const { entries } = await readPrefix(client, queueRange(client.lockPrefix, name));
    const lease = entry.leaseId === 0n ? 'no lease' : `lease ${leaseHex(entry.leaseId)}`;
    const what = `${key} (lock ${JSON.stringify(printable(name))}, ${placeOf(entry, entries)}, value ${quotedValue(entry.value)}, token ${entry.token}, ${lease})`;
    if (!flags.yes) {
      const yes = await confirm(
        `Delete ${what}?\nIts holder, if still running, loses the lock. [y/N] `,
      );
      if (!yes) {
        process.stderr.write('nothing removed\n');
        return exitCodes.declined;
      }
    }
    const res = await kvCall(
      client,
      'unlock txn',
      (kv, options) =>
        kv.txn(
          {
            compare: [
              {
                key: Buffer.from(key),
                target: 'Create',
                result: 'Equal',
                create_revision: entry.token.toString(),
              },
            ],
            success: [{ request_delete_range: { key: Buffer.from(key) } }],
            failure: [],
          },
          options,
        ),
      // Guarded by the create revision: sending it twice deletes at most this one key.
      { idempotent: true },
    );
    if (!res.succeeded) {
      throw new CliError(
        `${key} changed since it was read (released, or taken again with a new token): nothing removed`,
        exitCodes.notFound,
      );
    }
    await write(`removed ${what}\n`);
    return exitCodes.ok;
  } finally {
    await client.close();
  }
}
