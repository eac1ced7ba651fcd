/**
 * Runs a command while a lock or a leadership is held, through the keeper (keeper.ts): passes
 * the token in the environment, forwards signals, keeps the keeper's deadline up to date, stops
 * the command when the hold is lost, and turns the command's end into leasehold's exit code.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { exitCodes, signalExitCode, CliError } from './exit-codes.js';
import { formatDuration } from './format.js';
import type { Signals } from './signals.js';

/** Why the keeper stopped the command. */
export type StopCause = 'lost' | 'deadline' | 'parent-gone';

/** leasehold → keeper. Times are CLOCK_MONOTONIC milliseconds. */
export type KeeperRequest =
  | {
      type: 'start';
      file: string;
      args: string[];
      env: NodeJS.ProcessEnv;
      graceMs: number;
      deadlineAt: number;
    }
  | { type: 'deadline'; at: number }
  | { type: 'signal'; signal: NodeJS.Signals }
  | { type: 'lost' };

/** keeper → leasehold. */
export type KeeperReport =
  | { type: 'started'; pid: number }
  | { type: 'spawn-error'; code: string; message: string }
  | { type: 'stopping'; cause: StopCause }
  | {
      type: 'exit';
      code: number | null;
      signal: NodeJS.Signals | null;
      stopped: StopCause | undefined;
    };

/** What a held lock and a leadership have in common, as far as running a command goes. */
export interface Held {
  readonly token: bigint;
  readonly key: string;
  readonly signal: AbortSignal;
  readonly session: {
    readonly leaseId: bigint;
    readonly ttlSeconds: number;
    remainingMs(): number;
  };
}

export interface SuperviseOptions {
  hold: Held;
  /** `lock "deploy"`, `leadership of "scheduler"`: for messages. */
  what: string;
  /** The command and its arguments. */
  command: readonly string[];
  /** Added to leasehold's own environment for the command. */
  env: Record<string, string>;
  graceMs: number;
  signals: Signals;
  /** One line for stderr. */
  log: (line: string) => void;
}

export const monoMs = (): number => Number(process.hrtime.bigint()) / 1e6;

const keeperPath = fileURLToPath(new URL('./keeper.js', import.meta.url));

/** Variables that would make a Node command talk to leasehold's IPC channel. */
const PRIVATE_ENV = ['NODE_CHANNEL_FD', 'NODE_CHANNEL_SERIALIZATION_MODE'];

/** The environment of the command: leasehold's, without its private variables, plus `extra`. */
export function commandEnv(
  base: NodeJS.ProcessEnv,
  extra: Record<string, string>,
): NodeJS.ProcessEnv {
  const env = { ...base, ...extra };
  for (const name of PRIVATE_ENV) delete env[name];
  return env;
}

/** How often the keeper hears the session's deadline: well within a keepalive interval. */
export function deadlineTickMs(ttlMs: number): number {
  return Math.max(50, Math.min(500, Math.floor(ttlMs / 10)));
}

/** Why a hold ended, in words: the SDK's reason without its repetition of key and token. */
export function lossReason(reason: unknown): string {
  if (!(reason instanceof Error)) return 'its lease deadline passed while leasehold could not run';
  return / is lost: (.*)$/s.exec(reason.message)?.[1] ?? reason.message;
}

const stopping = (graceMs: number) =>
  graceMs === 0 ? 'SIGKILL' : `SIGTERM, then SIGKILL after ${formatDuration(graceMs)}`;

/** A command line as a shell would read it back, for messages. */
export function shellWords(words: readonly string[]): string {
  return words
    .map((w) => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`))
    .join(' ');
}

/**
 * Runs the command until it exits. Resolves to the exit code leasehold should end with: the
 * command's (or 128 + N for a signal), or {@link exitCodes.lost} if the hold was lost first.
 */
export async function supervise(options: SuperviseOptions): Promise<number> {
  const { hold, command, signals, log } = options;
  const [file, ...args] = command;
  if (file === undefined) throw new CliError('no command to run', exitCodes.usage);
  if (hold.signal.aborted) {
    // Lost between being granted and now: the command must not start at all.
    log(
      `${options.what} (token ${hold.token}) lost before the command started: ${lossReason(hold.signal.reason)}`,
    );
    return exitCodes.lost;
  }

  const keeper = spawn(process.execPath, [keeperPath], {
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
  });
  const send = (message: KeeperRequest) => {
    if (keeper.connected) keeper.send(message, (err) => void err); // a dead keeper says so by exiting
  };
  const deadline = () => monoMs() + hold.session.remainingMs();

  let lostNoticed = false;
  /** `running`: the command has not exited yet, so it is being stopped. */
  const onLost = (running = true) => {
    if (lostNoticed) return;
    lostNoticed = true;
    const why = `${options.what} (token ${hold.token}) lost: ${lossReason(hold.signal.reason)}`;
    log(running ? `${why}; stopping the command (${stopping(options.graceMs)})` : why);
    if (running) send({ type: 'lost' });
  };

  const abortListener = () => onLost();
  let tick: NodeJS.Timeout | undefined;
  let pid: number | undefined;
  try {
    return await new Promise<number>((resolve, reject) => {
      keeper.on('message', (report: KeeperReport) => {
        switch (report.type) {
          case 'started':
            pid = report.pid;
            return;
          case 'stopping':
            if (report.cause === 'deadline') onLost();
            return;
          case 'spawn-error': {
            const [code, why] =
              report.code === 'ENOENT'
                ? [exitCodes.commandNotFound, 'command not found']
                : [exitCodes.cannotExecute, `cannot execute (${report.code})`];
            return reject(new CliError(`${why}: ${file}`, code));
          }
          case 'exit': {
            // Reading the signal checks the session's deadline: a loss that happened while the
            // command ran counts, even if no timer has reported it yet.
            if (hold.signal.aborted || report.stopped !== undefined || lostNoticed) {
              onLost(false);
              return resolve(exitCodes.lost);
            }
            return resolve(report.code ?? signalExitCode(report.signal ?? 'SIGKILL'));
          }
        }
      });
      // 'close' comes after the IPC channel is drained: the exit report, if any, came first.
      keeper.once('close', (code, signal) => {
        const running = pid === undefined ? '' : `; the command (pid ${pid}) may still be running`;
        reject(
          new CliError(
            `the keeper process ended unexpectedly (${signal ?? `code ${code}`})${running}`,
            exitCodes.internal,
          ),
        );
      });
      keeper.once('error', reject);

      send({
        type: 'start',
        file,
        args,
        env: commandEnv(process.env, options.env),
        graceMs: options.graceMs,
        deadlineAt: deadline(),
      });
      signals.forward((signal) => send({ type: 'signal', signal }));
      if (hold.signal.aborted) onLost();
      else hold.signal.addEventListener('abort', abortListener, { once: true });
      let last = 0;
      tick = setInterval(
        () => {
          if (hold.signal.aborted) return onLost();
          const at = deadline();
          if (Math.abs(at - last) >= 1) send({ type: 'deadline', at: (last = at) });
        },
        deadlineTickMs(hold.session.ttlSeconds * 1000),
      );
    });
  } finally {
    clearInterval(tick);
    hold.signal.removeEventListener('abort', abortListener);
    keeper.removeAllListeners('message');
    keeper.removeAllListeners('close');
    if (keeper.connected) keeper.disconnect();
  }
}
