/**
 * Runs a command while a lock or a leadership is held, through the keeper (keeper.ts): passes
 * the token in the environment, forwards signals, keeps the keeper's deadline up to date, stops
 * the command when the hold is lost, and turns the command's end into leasehold's exit code.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { exitCodes, signalExitCode, CliError } from './exit-codes.js';
import { formatDuration } from './format.js';
import { groupGone } from './group.js';
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
      /** No message from leasehold for this long: the keeper takes it for frozen. */
      silenceMs: number;
      deadlineAt: number;
    }
  /** The session's deadline, sent every tick whether it moved or not: a sign of life too. */
  | { type: 'deadline'; at: number }
  | { type: 'signal'; signal: NodeJS.Signals }
  | { type: 'lost' };

/** keeper → leasehold. */
export type KeeperReport =
  | { type: 'started'; pid: number }
  | { type: 'spawn-error'; code: string; message: string }
  /** `killInMs`: when the SIGKILL comes; 0: it was sent alone, without a SIGTERM. */
  | { type: 'stopping'; cause: StopCause; killInMs: number }
  | {
      type: 'exit';
      code: number | null;
      signal: NodeJS.Signals | null;
      stopped: StopCause | undefined;
      /** After a stop: part of the command's group could not be killed. */
      lingering: boolean;
    };

/** What a held lock and a leadership have in common, as far as running a command goes. */
export interface Held {
  readonly token: bigint;
  readonly key: string;
  readonly signal: AbortSignal;
  readonly session: {
    readonly leaseId: bigint;
    readonly ttlSeconds: number;
    timeLeftMs(): number;
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
  return Math.max(50, Math.min(250, Math.floor(ttlMs / 20)));
}

/** After this long without a message, the keeper takes leasehold for frozen: three ticks. */
export const silenceMs = (ttlMs: number): number => 3 * deadlineTickMs(ttlMs);

/** How long leasehold waits for the command's group to die after SIGKILLing it itself. */
const KILL_WAIT_MS = 5_000;

/**
 * After telling the keeper the hold is lost, how long leasehold waits for it to say it is
 * stopping the command before it takes the keeper for frozen (stopped by its pid) and stops the
 * command itself: twice the silence after which the keeper takes leasehold for frozen.
 */
export const keeperAnswerMs = (ttlMs: number): number => 2 * silenceMs(ttlMs);

/** Why a hold ended, in words: the SDK's reason without its repetition of key and token. */
export function lossReason(reason: unknown): string {
  if (!(reason instanceof Error)) return 'its lease deadline passed while leasehold could not run';
  return / is lost: (.*)$/s.exec(reason.message)?.[1] ?? reason.message;
}

const stopping = (killInMs: number) =>
  killInMs <= 0 ? 'SIGKILL' : `SIGTERM, then SIGKILL after ${formatDuration(killInMs)}`;

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

  // The keeper leads a session of its own: a stop or kill of leasehold's process group (a
  // shell's `kill -STOP %1`, a supervisor, a CI runner pausing the job) must not reach it, since
  // it exists to act when leasehold cannot. The command gets a session of its own from it.
  const keeper = spawn(process.execPath, [keeperPath], {
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    detached: true,
  });
  const send = (message: KeeperRequest) => {
    if (keeper.connected) keeper.send(message, (err) => void err); // a dead keeper says so by exiting
  };
  const deadline = () => monoMs() + hold.session.timeLeftMs();

  let lostNoticed = false;
  /** Set once the command is running: leasehold stops it itself if the keeper cannot. */
  let takeOver = () => {};
  let takeOverTimer: NodeJS.Timeout | undefined;
  /** The keeper said it is stopping the command: it answers, nothing to take over. */
  let keeperStopping = false;
  /** `running`: the command has not exited yet, so it is being stopped. */
  const onLost = (running = true, killInMs = options.graceMs) => {
    if (lostNoticed) return;
    lostNoticed = true;
    const why = `${options.what} (token ${hold.token}) lost: ${lossReason(hold.signal.reason)}`;
    log(running ? `${why}; stopping the command (${stopping(killInMs)})` : why);
    if (!running) return;
    send({ type: 'lost' });
    if (keeperStopping) return;
    takeOverTimer = setTimeout(() => takeOver(), keeperAnswerMs(hold.session.ttlSeconds * 1000));
  };

  const abortListener = () => onLost();
  let tick: NodeJS.Timeout | undefined;
  let pid: number | undefined;
  let exitReported = false;
  try {
    return await new Promise<number>((resolve, reject) => {
      keeper.on('message', (report: KeeperReport) => {
        switch (report.type) {
          case 'started':
            pid = report.pid;
            return;
          case 'stopping':
            keeperStopping = true;
            clearTimeout(takeOverTimer);
            if (report.cause === 'deadline') onLost(true, report.killInMs);
            return;
          case 'spawn-error': {
            const [code, why] =
              report.code === 'ENOENT'
                ? [exitCodes.commandNotFound, 'command not found']
                : [exitCodes.cannotExecute, `cannot execute (${report.code})`];
            return reject(new CliError(`${why}: ${file}`, code));
          }
          case 'exit': {
            if (exitReported) return; // leasehold stopped the command itself (takeOver)
            exitReported = true;
            clearTimeout(takeOverTimer);
            if (report.lingering) {
              return reject(
                new CliError(
                  `${options.what} (token ${hold.token}): part of the command (process group ${pid}) survived SIGKILL; the lock is not released: it expires within ${hold.session.ttlSeconds}s`,
                  exitCodes.lost,
                  { keepLease: true },
                ),
              );
            }
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
        if (exitReported) return;
        // Killed from outside (the OOM killer, a kill -9): not a bug of leasehold.
        const exitCode = signal === null ? exitCodes.internal : exitCodes.keeperGone;
        const ended = `the keeper process ended unexpectedly (${signal ?? `code ${code}`})`;
        const expires = `the lock is not released: it expires within ${hold.session.ttlSeconds}s`;
        if (pid === undefined) {
          // The command may have started without our hearing of it: it cannot be found.
          return reject(new CliError(`${ended}; ${expires}`, exitCode, { keepLease: true }));
        }
        // The command runs in its own group, unsupervised: kill all of it before the lock can
        // go to anyone else, and release only once it is gone.
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
        void groupGone(pid, monoMs() + KILL_WAIT_MS).then((gone) =>
          reject(
            gone
              ? new CliError(
                  `${ended}; the command (process group ${pid}) was killed (SIGKILL)`,
                  exitCode,
                )
              : new CliError(
                  `${ended}; the command (process group ${pid}) survived SIGKILL; ${expires}`,
                  exitCode,
                  { keepLease: true },
                ),
          ),
        );
      });
      keeper.once('error', reject);

      // The keeper did not answer the loss: it was stopped by its own pid (its group is not
      // leasehold's). leasehold stops the command's group itself, and ends without waiting for
      // the keeper, which may stay stopped for good.
      takeOver = () => {
        if (pid === undefined || exitReported) return;
        const group = pid;
        const graceMs = options.graceMs;
        log(
          `the keeper process (pid ${keeper.pid}) did not answer; stopping the command (process group ${group}) from leasehold (${stopping(graceMs)})`,
        );
        const kill = (signal: NodeJS.Signals) => {
          try {
            process.kill(-group, signal);
          } catch {
            // Gone already.
          }
        };
        kill(graceMs === 0 ? 'SIGKILL' : 'SIGTERM');
        const killTimer = graceMs === 0 ? undefined : setTimeout(() => kill('SIGKILL'), graceMs);
        void groupGone(group, monoMs() + graceMs + KILL_WAIT_MS).then((gone) => {
          clearTimeout(killTimer);
          if (exitReported) return;
          exitReported = true;
          if (gone) return resolve(exitCodes.lost);
          reject(
            new CliError(
              `${options.what} (token ${hold.token}): part of the command (process group ${group}) survived SIGKILL; the lock is not released: it expires within ${hold.session.ttlSeconds}s`,
              exitCodes.lost,
              { keepLease: true },
            ),
          );
        });
      };

      send({
        type: 'start',
        file,
        args,
        env: commandEnv(process.env, options.env),
        graceMs: options.graceMs,
        silenceMs: silenceMs(hold.session.ttlSeconds * 1000),
        deadlineAt: deadline(),
      });
      signals.forward((signal) => send({ type: 'signal', signal }));
      if (hold.signal.aborted) onLost();
      else hold.signal.addEventListener('abort', abortListener, { once: true });
      tick = setInterval(
        () => {
          if (hold.signal.aborted) return onLost();
          send({ type: 'deadline', at: deadline() });
        },
        deadlineTickMs(hold.session.ttlSeconds * 1000),
      );
    });
  } finally {
    clearInterval(tick);
    clearTimeout(takeOverTimer);
    hold.signal.removeEventListener('abort', abortListener);
    keeper.removeAllListeners('message');
    keeper.removeAllListeners('close');
    if (keeper.connected) keeper.disconnect();
  }
}
