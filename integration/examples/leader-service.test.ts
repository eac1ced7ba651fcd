/**
 * examples/leader-service does what the README walks through, for real against the run's etcd:
 * one command starts three replicas; one is elected and publishes a heartbeat fenced by its
 * term's token; every replica reports that leader over HTTP and logs each change; SIGTERM makes
 * the leader step down and exit 0, and another replica takes over at once with a higher token.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { connect } from '@leasehold/core';
import { etcdStore } from '@leasehold/fence/etcd';
import { freePort, startEtcd } from '@leasehold/testing';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const dir = fileURLToPath(new URL('../../examples/leader-service/', import.meta.url));
const files = { replica: `${dir}replica.mjs`, run: `${dir}run.mjs` };
const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());

/**
 * TypeScript's errors for the example's JavaScript, checked against the packages' types. Not
 * strict: plain JavaScript has no annotations to check. What this catches is what drifts: a
 * renamed method, an unknown option, a wrong argument shape.
 */
function jsTypeErrors(names: string[]): string[] {
  const program = ts.createProgram(names, {
    allowJs: true,
    checkJs: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2022.d.ts'],
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    skipLibCheck: true,
    types: ['node'],
  });
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where =
      d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
    const at = where ? `${d.file!.fileName}:${where.line + 1}: ` : '';
    return at + ts.flattenDiagnosticMessageText(d.messageText, '\n');
  });
}

/** Runs `source` as an ES module from examples/, as a user's program would run. */
function runSource(source: string, env: Record<string, string>) {
  const child = spawn(process.execPath, ['--input-type=module'], {
    cwd: fileURLToPath(new URL('../../examples/', import.meta.url)),
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const run = { child, output: '', running: true };
  child.stdout.on('data', (d: Buffer) => (run.output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (run.output += d.toString()));
  const exited = new Promise<{ code: number | null }>((resolve) =>
    child.once('exit', (code) => {
      run.running = false;
      resolve({ code });
    }),
  );
  child.stdin.end(source);
  return { run, exited };
}

/** The ```js blocks of the root README's "Leader election" section. */
function readmeElectionBlocks(): string[] {
  const readme = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');
  const section = /\n## Leader election\n([\s\S]*?)(?=\n## )/.exec(readme)?.[1] ?? '';
  return [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

interface Replica {
  name: string;
  url: string;
  pid: number;
}

interface Term {
  name: string;
  token: bigint;
}

describe('examples/leader-service', () => {
  it('type-checks as JavaScript against the packages', () => {
    expect(jsTypeErrors([files.replica, files.run])).toEqual([]);
  }, 30_000);

  it("the README's election walkthrough quotes replica.mjs as it is", () => {
    const blocks = readmeElectionBlocks();
    expect(blocks.length).toBeGreaterThan(0);
    const source = readFileSync(files.replica, 'utf8');
    for (const block of blocks) expect(source).toContain(block);
  });

  it('three replicas elect one; SIGTERM makes it resign and exit 0, and another takes over with a higher token', async () => {
    const electionPrefix = uniquePrefix('leader-service');
    const fencePrefix = uniquePrefix('leader-service-fence');
    const ports = [await freePort(), await freePort(), await freePort()];
    const run = spawn(process.execPath, [files.run], {
      env: {
        ...process.env,
        ETCD_ENDPOINTS: endpoints.join(','),
        ELECTION_PREFIX: electionPrefix,
        FENCE_PREFIX: fencePrefix,
        PORTS: ports.join(','),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, so a failed test can kill the runner and its replicas together.
      detached: true,
    });
    let output = '';
    run.stdout.on('data', (d: Buffer) => (output += d.toString()));
    run.stderr.on('data', (d: Buffer) => (output += d.toString()));
    let running = true;
    const exited = new Promise<{ code: number | null }>((resolve) =>
      run.once('exit', (code) => {
        running = false;
        resolve({ code });
      }),
    );
    let passed = false;

    const terms = () =>
      [...output.matchAll(/^\[(\w+)\] elected: leading with token (\d+)$/gm)].map((m): Term => ({
        name: m[1]!,
        token: BigInt(m[2]!),
      }));
    const exitOf = (name: string) =>
      new RegExp(`^\\[run\\] ${name} exited with (.+)$`, 'm').exec(output)?.[1];
    const leaderAt = async (url: string) => {
      const res = await fetch(`${url}/leader`);
      expect(res.status).toBe(200);
      const leader = (await res.json()) as {
        value: string;
        token: string;
        key: string;
        leaseId: string;
      } | null;
      // The lease id is shown in hex, as the key (and every log line and the CLI) has it.
      if (leader) expect(leader.key.endsWith(`/${leader.leaseId}`), leader.key).toBe(true);
      return leader;
    };
    await using client = await connect({ endpoints });
    const store = etcdStore(client, { prefix: fencePrefix });

    try {
      const replicas = await waitFor(
        () => {
          const found = [...output.matchAll(/^\[(\w+)\] serving (\S+)\/leader \(pid (\d+)\)$/gm)];
          if (found.length < 3) return undefined;
          return found.map((m): Replica => ({ name: m[1]!, url: m[2]!, pid: Number(m[3]) }));
        },
        { timeoutMs: 30_000, what: 'three replicas serving' },
      );
      expect(replicas.map((r) => r.name).sort()).toEqual(['a', 'b', 'c']);
      expect(replicas.map((r) => r.url).sort()).toEqual(
        ports.map((p) => `http://127.0.0.1:${p}`).sort(),
      );
      const byName = new Map(replicas.map((r) => [r.name, r]));

      const first = await waitFor(() => terms()[0], {
        timeoutMs: 30_000,
        what: 'a replica is elected',
      });
      const leader = byName.get(first.name)!;
      const value = `${leader.name} ${leader.url}`;
      const observed = (name: string, term: Term, v: string) =>
        output.includes(`[${name}] observed: ${v} (token ${term.token}) leads at revision `);

      // Every replica answers with the same leader, and has logged it through observe().
      for (const { url } of replicas) {
        expect(await leaderAt(url)).toMatchObject({ value, token: String(first.token) });
      }
      await waitFor(() => replicas.every((r) => observed(r.name, first, value)), {
        what: 'every replica observed the first leader',
      });
      // The leader-only work wrote under the term's token.
      await waitFor(
        async () => {
          const beat = await store.read('heartbeat');
          return beat?.token === first.token && beat.value.startsWith(`${leader.name} beat `);
        },
        { what: "the leader's fenced heartbeat" },
      );
      expect(terms()).toHaveLength(1); // one leader at a time

      const sentAt = performance.now();
      process.kill(leader.pid, 'SIGTERM');
      const second = await waitFor(() => terms()[1], {
        timeoutMs: 20_000,
        what: 'another replica is elected',
      });
      const takeoverMs = performance.now() - sentAt;
      const leaderExit = await waitFor(() => exitOf(leader.name), {
        timeoutMs: 20_000,
        what: `${leader.name} exits`,
      });
      console.log(
        `[leader-service] ${leader.name} (token ${first.token}) got SIGTERM; ${second.name} leads with token ${second.token} after ${takeoverMs.toFixed(0)} ms`,
      );
      expect(leaderExit, output).toBe('code 0');
      expect(output).toContain(`[${leader.name}] stepping down: SIGTERM received`);
      expect(output).toContain(`[${leader.name}] left the election`);
      expect(second.name).not.toBe(leader.name);
      expect(second.token > first.token).toBe(true);
      // It resigned: the next leader did not wait for the old lease (10 s TTL) to expire.
      expect(takeoverMs).toBeLessThan(10_000);

      // The survivors report and observe the new leader; the heartbeat moves to the new token.
      const next = byName.get(second.name)!;
      const nextValue = `${next.name} ${next.url}`;
      const survivors = replicas.filter((r) => r !== leader);
      for (const { url } of survivors) {
        expect(await leaderAt(url)).toMatchObject({
          value: nextValue,
          token: String(second.token),
        });
      }
      await waitFor(() => survivors.every((r) => observed(r.name, second, nextValue)), {
        what: 'the survivors observed the new leader',
      });
      await waitFor(async () => (await store.read('heartbeat'))?.token === second.token, {
        what: "the new leader's fenced heartbeat",
      });
      await expect(
        store.write({ resource: 'heartbeat', token: first.token, value: 'stale' }),
      ).rejects.toMatchObject({ code: 'STALE_TOKEN' });

      expect(terms()).toHaveLength(2);

      // Stopping the runner stops the rest: each steps down cleanly and leaves nothing behind.
      process.kill(run.pid!, 'SIGTERM');
      const { code } = await waitFor(() => exited, { timeoutMs: 30_000, what: 'the runner exits' });
      for (const { name } of survivors) expect(exitOf(name), output).toBe('code 0');
      expect(code, output).toBe(0);
      expect(await admin.getAll().prefix(electionPrefix).keys()).toEqual([]);
      passed = true;
    } finally {
      if (!passed) console.error(`[leader-service] the example's output:\n${output}`);
      if (running) {
        try {
          process.kill(-run.pid!, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
  }, 120_000);
});

// A service whose only job is its leader-only work has nothing else keeping Node running: lead()
// itself must, also while it waits to campaign again. The program below is such a service; it
// starts lead() only once the test has stopped etcd (until then an interval keeps it running).
const leadOnly = `
import { connect } from '@leasehold/core';
const client = await connect({
  endpoints: process.env.ETCD_ENDPOINTS,
  electionPrefix: process.env.ELECTION_PREFIX,
  callTimeoutMs: 1000,
});
const hold = setInterval(() => {}, 1000);
await new Promise((resolve) => {
  process.once('SIGUSR2', resolve);
  console.log('ready');
});
clearInterval(hold);
try {
  await client.lead('job', 'only-lead', () => console.log('leading'), {
    onLost: (err) => console.log('retrying after ' + err.code),
  });
} finally {
  await client.close();
}
`;

describe('a process whose only work is lead()', () => {
  it('keeps running while etcd is unreachable, and leads once etcd is back', async () => {
    await using etcd = await startEtcd({ provider: 'local', members: 1 });
    const { run, exited } = runSource(leadOnly, {
      ETCD_ENDPOINTS: etcd.endpoints.join(','),
      ELECTION_PREFIX: uniquePrefix('lead-only'),
    });
    try {
      await waitFor(() => run.output.includes('ready'), { timeoutMs: 30_000, what: 'ready' });
      await etcd.members[0]!.stop();
      run.child.kill('SIGUSR2');
      await waitFor(() => run.output.includes('retrying after ETCD_UNAVAILABLE'), {
        timeoutMs: 30_000,
        what: 'lead() reports a failed campaign it will retry',
      });
      await etcd.members[0]!.start();
      const { code } = await waitFor(() => exited, { timeoutMs: 60_000, what: 'the process ends' });
      // Exit code 13 is Node's "unsettled top-level await": the event loop ran empty while
      // lead() was waiting to campaign again, so Node ended the process.
      expect({ code, leading: run.output.includes('leading') }, run.output).toEqual({
        code: 0,
        leading: true,
      });
    } finally {
      if (run.running) run.child.kill('SIGKILL');
    }
  }, 120_000);
});
