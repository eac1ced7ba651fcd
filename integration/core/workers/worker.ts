import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

type Reply = Record<string, unknown>;

/** A lock-worker child process with a request/response channel over stdio. */
export class Worker implements AsyncDisposable {
  readonly #pending = new Map<number, (reply: Reply) => void>();
  #seq = 0;

  private constructor(readonly child: ChildProcess) {}

  static async start(endpoints: string, ttlSeconds: number): Promise<Worker> {
    const script = fileURLToPath(new URL('./lock-worker.mjs', import.meta.url));
    const child = spawn(process.execPath, [script, endpoints, String(ttlSeconds)], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const worker = new Worker(child);
    const ready = new Promise<void>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`worker exited with ${code} before ready`)));
      const lines = createInterface({ input: child.stdout });
      lines.on('line', (line) => {
        const msg = JSON.parse(line) as Reply;
        if (msg.ready) return resolve();
        worker.#pending.get(msg.seq as number)?.(msg);
        worker.#pending.delete(msg.seq as number);
      });
    });
    await withDeadline(ready, 15_000, 'worker start');
    return worker;
  }

  request(cmd: string, args: Reply = {}, timeoutMs = 30_000): Promise<Reply> {
    const seq = ++this.#seq;
    const reply = new Promise<Reply>((resolve) => this.#pending.set(seq, resolve));
    this.child.stdin!.write(`${JSON.stringify({ seq, cmd, ...args })}\n`);
    return withDeadline(reply, timeoutMs, `worker ${cmd}`);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGCONT');
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGKILL');
    await exited;
  }
}

export function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
