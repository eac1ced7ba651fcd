import { fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

/**
 * A benchmark worker: another Node process running `bench/src/workers/<role>.mjs`, driven over
 * IPC. `request` sends a command and resolves with its answer; `events` are what the worker
 * reports on its own (measurements taken in its process).
 */
export async function startWorker(role, config, { execArgv = [] } = {}) {
  const path = fileURLToPath(new URL(`../workers/${role}.mjs`, import.meta.url));
  const child = fork(path, [JSON.stringify(config)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    // BENCH_WORKER_ARGS: extra node flags for every worker, e.g. to profile the contenders.
    execArgv: [...execArgv, ...(process.env.BENCH_WORKER_ARGS?.split(' ').filter(Boolean) ?? [])],
    serialization: 'advanced',
  });
  const pending = new Map();
  const listeners = new Set();
  let nextId = 0;
  let exitError;
  child.on('message', (msg) => {
    if (msg.kind === 'reply') {
      const p = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) p?.reject(new Error(`worker ${role}: ${msg.error}`));
      else p?.resolve(msg.value);
    } else if (msg.kind === 'event') {
      for (const fn of listeners) fn(msg.value);
    }
  });
  const exited = once(child, 'exit').then(([code, signal]) => {
    exitError = new Error(`worker ${role} exited (${signal ?? code})`);
    for (const p of pending.values()) p.reject(exitError);
    pending.clear();
  });
  const worker = {
    pid: child.pid,
    exited,
    request(cmd, args = {}) {
      if (exitError) return Promise.reject(exitError);
      const id = nextId++;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        child.send({ id, cmd, args });
      });
    },
    onEvent(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    kill(signal = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
    async close() {
      if (!exitError) await worker.request('exit').catch(() => undefined);
      const timer = setTimeout(() => worker.kill(), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
  await worker.request('ready');
  return worker;
}

/** Worker side: the configuration the parent started this worker with. */
export const workerConfig = () => JSON.parse(process.argv[2] ?? '{}');

/**
 * Worker side: answers the parent's commands with `handlers[cmd](args)`; `ready` (the first
 * command) waits for `init`.
 */
export function serve(init, handlers) {
  const config = workerConfig();
  const emit = (value) => process.send?.({ kind: 'event', value });
  const all = {
    ready: async () => {
      await init;
      return true;
    },
    exit: async () => {
      await handlers.close?.();
      setImmediate(() => process.exit(0));
    },
    ...handlers,
  };
  process.on('message', ({ id, cmd, args }) => {
    Promise.resolve()
      .then(() => {
        const handler = all[cmd];
        if (!handler) throw new Error(`no command ${cmd}`);
        return handler(args);
      })
      .then(
        (value) => process.send?.({ kind: 'reply', id, value }),
        (err) => process.send?.({ kind: 'reply', id, error: String(err?.stack ?? err) }),
      );
  });
  // The parent is gone: nothing more to measure.
  process.on('disconnect', () => process.exit(0));
  return { config, emit };
}
