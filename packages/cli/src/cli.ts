/**
 * The `leasehold` program: commands, help with examples, and the one place where errors become
 * one line on stderr and an exit code (exit-codes.ts).
 */
import { readFileSync } from 'node:fs';
import { isConnectError, isInvalidArgumentError, isLeaseholdError } from '@leasehold/core';
import { Command, CommanderError, Help, Option, type OptionValues } from 'commander';
import {
  addConnectionOptions,
  CONNECTION_GROUP,
  connectMessage,
  withFlagNames,
} from './connection.js';
import { CliError, exitCodeFor, exitCodes, invalidArgument } from './exit-codes.js';
import { DEFAULT_GRACE_MS, runAsLeader, runUnderLock } from './hold.js';
import { inspect } from './inspect.js';
import { observe } from './observe.js';
import { unlock } from './unlock.js';
import { showWarnings } from './warnings.js';

/**
 * Where {@link main} writes: the streams the executable passes are `process.stdout` and
 * `process.stderr`.
 */
export interface Io {
  /** Output: tables, JSON lines, the values `observe` prints. */
  stdout: NodeJS.WriteStream;
  /** Errors, warnings and progress. */
  stderr: NodeJS.WriteStream;
}

const version = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  }
).version;

/** Writes `text` and resolves once it has been handed to the OS (before the process exits). */
export function writer(stream: NodeJS.WritableStream): (text: string) => Promise<void> {
  return (text) =>
    new Promise((resolve, reject) => {
      stream.write(text, (err) => (err ? reject(err) : resolve()));
    });
}

/** The error as the one line leasehold prints, and with `debug` its stack and causes. */
export function errorText(err: unknown, debug: boolean): string {
  const code = exitCodeFor(err);
  const raw = err instanceof Error ? err.message : String(err);
  const named = isLeaseholdError(err) ? withFlagNames(raw, isInvalidArgumentError(err)) : raw;
  const message = isConnectError(err) ? connectMessage(named) : named;
  const oneLine = message.replace(/\s*\n\s*/g, ' ');
  const hint =
    code === exitCodes.internal && !(isLeaseholdError(err) || debug)
      ? ' (an unexpected error: run with --debug for details)'
      : '';
  const lines = [`leasehold: ${oneLine}${hint}`];
  if (debug) {
    for (let e: unknown = err; e !== undefined; e = (e as { cause?: unknown }).cause) {
      if (!(e instanceof Error)) {
        lines.push(JSON.stringify(e) ?? 'undefined');
        break;
      }
      lines.push(e.stack ?? e.message);
    }
  }
  return `${lines.join('\n')}\n`;
}

const EXAMPLES = {
  run: `
Examples:
  # A nightly job on several hosts: whichever host comes first runs it, the others skip it.
  leasehold run --lock nightly-report --no-wait -- ./nightly-report.sh

  # A deploy step that must not overlap: wait up to 10 minutes for the one running now.
  leasehold run --lock deploy/prod --wait-timeout 600000 -- ./deploy.sh v1.4.2

  # The command gets the fencing token: send it with every write to the protected store.
  leasehold run --lock invoice-42 -- sh -c 'echo "token $LEASEHOLD_TOKEN"'

  # At most 3 of these at once, anywhere; each gets its slot (0, 1 or 2).
  leasehold run --permits 3 --lock payment-api -- sh -c './call-api.sh --slot "$LEASEHOLD_SLOT"'

The command gets LEASEHOLD_TOKEN (the fencing token, decimal), LEASEHOLD_LOCK_KEY (the etcd key)
and LEASEHOLD_LEASE_ID (hex, as etcdctl lease commands take it); with --permits, LEASEHOLD_SLOT
too (fence per-slot data as the resource "<name>#<slot>"). If the lock is lost while it
runs, it gets SIGTERM, then SIGKILL after --grace, and leasehold exits ${exitCodes.lost}. Otherwise
leasehold exits with the command's code (128+N if a signal ended it).`,
  elect: `
Examples:
  # Three hosts run this; one at a time runs the scheduler, the next takes over if it dies.
  leasehold elect scheduler --value "$(hostname)" -- ./scheduler --serve

  # Give up after a minute without being elected (exit ${exitCodes.timeout}).
  leasehold elect reindex --wait-timeout 60000 -- ./reindex.sh

The command gets LEASEHOLD_TOKEN (the term's fencing token), LEASEHOLD_ELECTION_KEY and
LEASEHOLD_LEASE_ID. When leadership is lost: SIGTERM, SIGKILL after --grace, exit ${exitCodes.lost}.
When the command ends, leasehold resigns, so the next candidate is elected at once.`,
  observe: `
Examples:
  leasehold observe scheduler
  leasehold observe scheduler --json | jq -r .leader.value

Prints the state now, then every change (a new leader, a new value, no leader), until Ctrl-C.`,
  inspect: `
Examples:
  leasehold inspect                       # a table on a terminal, JSON otherwise
  leasehold inspect --prefix deploy/ --watch
  leasehold inspect --json | jq '.locks[] | {name, token: .holder.token}'

TTL is what the holder's lease has left; "expired" means its lease is gone, "none" that the
key has no lease (it never expires: see leasehold unlock).`,
  unlock: `
Examples:
  leasehold inspect --prefix deploy                 # find the stuck holder's key
  leasehold unlock deploy --key 694d5765fc71500b    # asks before deleting, on a terminal
  leasehold unlock deploy --key /leasehold/lock/deploy/694d5765fc71500b --yes

Deletes one key, only if it still has the create revision (token) it had when read. Its holder,
if it still runs, sees its lock lost. The key's lease is not revoked.`,
};

/**
 * A command's own flags with the program's (the connection flags), as one object: the shape
 * each command's function takes. Commander checked each flag's syntax; the functions check values.
 */
const all = <T extends object>(command: Command): T => command.optsWithGlobals<T & OptionValues>();

/** A value as a message shows it: strings quoted and cut short, others by their type. */
function shown(value: unknown): string {
  if (typeof value === 'string')
    return JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value);
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return typeof value;
}

const writable = (stream: unknown) =>
  typeof stream === 'object' &&
  stream !== null &&
  typeof (stream as Io['stdout']).write === 'function';

/**
 * Runs leasehold with `argv` (as `process.argv`) and resolves to the exit code. Never throws
 * for what the operator typed: those errors are written to `io.stderr`. Rejects with
 * `InvalidArgumentError` (of `@leasehold/core`) if `argv` is not an array of strings or `io` not
 * `{ stdout, stderr }` with writable streams: a program embedding leasehold passed them wrong.
 *
 * @example
 * ```ts
 * import { exitCodes, main } from '@leasehold/cli';
 *
 * const io = { stdout: process.stdout, stderr: process.stderr };
 * const code = await main(['node', 'leasehold', 'inspect', '--json'], io);
 * if (code !== exitCodes.ok) process.exitCode = code;
 * ```
 */
export async function main(argv: readonly string[], io: Io): Promise<number> {
  if (!Array.isArray(argv) || argv.some((arg) => typeof arg !== 'string')) {
    throw invalidArgument(
      `argv must be an array of strings, as process.argv (node, script, then the arguments), got ${Array.isArray(argv) ? 'an array with a non-string' : shown(argv)}`,
    );
  }
  if (typeof io !== 'object' || io === null || !writable(io.stdout) || !writable(io.stderr)) {
    throw invalidArgument(
      `io must be an object { stdout, stderr } of writable streams, got ${typeof io === 'object' && io !== null ? 'an object without them' : shown(io)}`,
    );
  }
  let result: number = exitCodes.ok;
  let debug = false;
  let command = '';
  const out = writer(io.stdout);
  const log = (line: string) => void io.stderr.write(`leasehold: ${line}\n`);

  const program = new Command('leasehold')
    .description(
      'Run a command under an etcd lock or leadership, with a fencing token, and see who holds what.',
    )
    .version(version, '-V, --version')
    .exitOverride()
    .showSuggestionAfterError(true)
    .configureOutput({
      writeOut: (text) => void io.stdout.write(text),
      writeErr: (text) => void io.stderr.write(text),
      // Printed by the catch below, as one line naming the command.
      outputError: () => {},
    })
    .addHelpText(
      'after',
      `\nEvery command takes the connection options, before or after its name (--endpoints or\nETCD_ENDPOINTS or ETCDCTL_ENDPOINTS, TLS, user).\nExit codes are listed in the README of @leasehold/cli.`,
    );
  program.hook('preSubcommand', (_, sub) => {
    command = sub.name();
  });
  // Connection options belong to the program, so they may come before the command's name or
  // after it; each command's help lists them too.
  addConnectionOptions(program).configureHelp({
    showGlobalOptions: true,
    visibleGlobalOptions(cmd) {
      return Help.prototype.visibleGlobalOptions
        .call(this, cmd)
        .filter((o) => o.long !== '--version');
    },
    formatItemList(heading, items, helper) {
      const title = heading === 'Global Options:' ? CONNECTION_GROUP : heading;
      return Help.prototype.formatItemList.call(this, title, items, helper);
    },
  });
  program.hook('preAction', (_, action) => {
    debug = action.optsWithGlobals<{ debug?: boolean }>().debug === true;
    // Process warnings and background clean-up errors: one line each, with --debug only.
    showWarnings(debug ? (line) => void io.stderr.write(`${line}\n`) : undefined);
  });

  program
    .command('run')
    .usage('--lock <name> [options] -- <command...>')
    .summary('run a command while holding a lock')
    .description(
      'Waits for the lock (FIFO), runs the command while holding it, and releases it when the command ends.',
    )
    .requiredOption('--lock <name>', 'the lock to hold')
    .option(
      '--permits <n>',
      "hold a permit of the semaphore <name> that admits n holders at once (LEASEHOLD_SLOT: the permit's slot)",
    )
    .option(
      '--ttl <seconds>',
      'lease TTL: how soon others get the lock if leasehold dies (default: 10)',
    )
    .option('--wait-timeout <ms>', `give up waiting after this long (exit ${exitCodes.timeout})`)
    .option('--no-wait', `do not wait: exit ${exitCodes.taken} at once if the lock is held`)
    .option('--value <value>', 'holder value others see in inspect (default: hostname:pid)')
    .option(
      '--grace <ms>',
      `after a loss, time between SIGTERM and SIGKILL (default: ${DEFAULT_GRACE_MS})`,
    )
    .argument('<command...>', 'the command and its arguments (after --)')
    .addHelpText('after', EXAMPLES.run)
    .action(async (cmd: string[], _: unknown, self: Command) => {
      result = await runUnderLock(all<Parameters<typeof runUnderLock>[0]>(self), cmd, {
        stderr: io.stderr,
        log,
      });
    });

  program
    .command('elect')
    .usage('<name> [options] -- <command...>')
    .summary('run a command while leader of an election')
    .description(
      'Campaigns in the election, runs the command while leader, and resigns when it ends.',
    )
    .argument('<name>', 'the election')
    .argument('<command...>', 'the command and its arguments (after --)')
    .option('--value <value>', 'what observers see as the leader (default: hostname:pid)')
    .option(
      '--ttl <seconds>',
      'lease TTL: how soon another candidate takes over if leasehold dies (default: 10)',
    )
    .option(
      '--wait-timeout <ms>',
      `give up campaigning after this long (exit ${exitCodes.timeout})`,
    )
    .option(
      '--grace <ms>',
      `after a loss, time between SIGTERM and SIGKILL (default: ${DEFAULT_GRACE_MS})`,
    )
    .addHelpText('after', EXAMPLES.elect)
    .action(async (name: string, cmd: string[], _: unknown, self: Command) => {
      result = await runAsLeader(name, all<Parameters<typeof runAsLeader>[1]>(self), cmd, {
        stderr: io.stderr,
        log,
      });
    });

  program
    .command('observe')
    .summary('print who leads an election, and every change')
    .description('Prints who leads the election now, then every change, one line each.')
    .argument('<name>', 'the election')
    .option('--json', 'one JSON object per line')
    .addHelpText('after', EXAMPLES.observe)
    .action(async (name: string, _: unknown, self: Command) => {
      result = await observe(name, all<Parameters<typeof observe>[1]>(self), (line) =>
        out(`${line}\n`),
      );
    });

  program
    .command('inspect')
    .summary('show locks, elections and cron jobs: holders, tokens, TTLs, waiters, fires')
    .description(
      'Shows every lock (holder, value, token, lease TTL left, waiters in order), every election (leader, value, candidates in order) and every @leasehold/cron job (schedule, next fire, newest fires with runner, outcome and token).',
    )
    .option('--prefix <prefix>', 'only locks, elections and jobs whose name starts with this')
    .addOption(
      new Option(
        '--cron-prefix <prefix>',
        'key prefix of @leasehold/cron claims and records (default /leasehold/cron/)',
      ).env('LEASEHOLD_CRON_PREFIX'),
    )
    .option('--watch', 'refresh until Ctrl-C')
    .option('--interval <ms>', 'refresh interval with --watch (default: 1000)')
    .option('--json', 'JSON (the default when stdout is not a terminal)')
    .addOption(new Option('--table', 'a table even when stdout is not a terminal'))
    .addHelpText('after', EXAMPLES.inspect)
    .action(async (_: unknown, self: Command) => {
      result = await inspect(all<Parameters<typeof inspect>[0]>(self), io.stdout, out);
    });

  program
    .command('unlock')
    .summary('delete one stuck holder key of a lock')
    .description(
      "Deletes one key of a lock's queue, guarded by its create revision, after asking on a terminal.",
    )
    .argument('<name>', 'the lock')
    .requiredOption('--key <key>', 'the key to delete, or just its lease id in hex')
    .option('--yes', 'do not ask (required when stdin is not a terminal)')
    .addHelpText('after', EXAMPLES.unlock)
    .action(async (name: string, _: unknown, self: Command) => {
      result = await unlock(name, all<Parameters<typeof unlock>[1]>(self), out);
    });

  // Waiting is this program's work: some SDK waits (connect()'s back-off between dials) run on
  // unref'd timers and would let Node exit mid-wait with nothing printed.
  const alive = setInterval(() => {}, 2 ** 30);
  try {
    await program.parseAsync(argv);
    return result;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') {
        return exitCodes.ok;
      }
      if (err.code === 'commander.help' && err.exitCode === 0) {
        return exitCodes.ok; // `leasehold help [command]`: the help went to stdout
      }
      if (err.code === 'commander.help' || err.code === 'commander.executeSubCommandAsync') {
        return exitCodes.usage; // `leasehold` alone: the help went to stderr
      }
      const where = command === '' ? 'leasehold' : `leasehold ${command}`;
      const message = err.message.replace(/^error: /, '').replace(/\s*\n\s*/g, ' ');
      const hint =
        /unknown option/.test(message) && (command === 'run' || command === 'elect')
          ? '; put the command to run after --'
          : '';
      io.stderr.write(`${where}: ${message}${hint} (${where} --help shows usage)\n`);
      return exitCodes.usage;
    }
    if (!(err instanceof CliError && err.silent) || debug) io.stderr.write(errorText(err, debug));
    return exitCodeFor(err);
  } finally {
    clearInterval(alive);
    showWarnings(undefined);
  }
}
