/**
 * The peer network: connections are attributed to the process that dialled them, so a cut
 * between two "members" refuses exactly their connections while the others pass.
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '@leasehold/testing';
import { PeerNetwork } from './peers.js';

/** A process that, per stdin line, dials `port`, sends a byte and says whether it came back. */
const DIALLER = `
const net = require('node:net');
const port = Number(process.argv[1]);
require('node:readline').createInterface({ input: process.stdin }).on('line', () => {
  const s = net.connect(port, '127.0.0.1');
  // One answer per dial: destroy() emits 'close' after 'data' or 'error', and a second line
  // would answer the next dial.
  let answered = false;
  const done = (r) => { if (answered) return; answered = true; s.destroy(); console.log(r); };
  s.on('error', () => done('cut'));
  s.on('close', () => done('cut'));
  s.on('data', () => done('ok'));
  s.setTimeout(2000, () => done('cut'));
  s.write('x');
});`;

function dialler(port: number) {
  const child = spawn(process.execPath, ['-e', DIALLER, String(port)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout });
  const answers: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  lines.on('line', (line) => {
    const next = waiting.shift();
    if (next) next(line);
    else answers.push(line);
  });
  return {
    pid: child.pid!,
    dial: () =>
      new Promise<string>((resolve) => {
        waiting.push(resolve);
        child.stdin.write('\n');
      }),
    kill: () => child.kill(),
  };
}

describe('peer network', () => {
  let echo: Server;
  let network: PeerNetwork;
  let a: ReturnType<typeof dialler>;
  let c: ReturnType<typeof dialler>;
  let stranger: ReturnType<typeof dialler>;

  beforeAll(async () => {
    echo = createServer((socket) => socket.on('data', (d) => socket.write(d)));
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    const echoPort = (echo.address() as { port: number }).port;
    const bPort = await freePort();
    const pids = new Map<string, number>();
    network = await PeerNetwork.start(
      [
        { name: 'a', advertisedPort: await freePort(), listenPort: echoPort },
        { name: 'b', advertisedPort: bPort, listenPort: echoPort },
        { name: 'c', advertisedPort: await freePort(), listenPort: echoPort },
      ],
      (name) => pids.get(name),
    );
    a = dialler(bPort);
    c = dialler(bPort);
    stranger = dialler(bPort); // a process that is no member
    pids.set('a', a.pid);
    pids.set('c', c.pid);
  });
  afterAll(async () => {
    a.kill();
    c.kill();
    stranger.kill();
    await network.close();
    echo.close();
  });

  it('cuts the members of different groups apart, and only them, until healed', async () => {
    expect([await a.dial(), await c.dial()]).toEqual(['ok', 'ok']);
    network.partition([['a'], ['b', 'c']]);
    try {
      expect(network.cutPairs).toEqual(['a|b', 'a|c']);
      // a's connections to b are refused; c (same side as b) still gets through.
      expect([await a.dial(), await c.dial()]).toEqual(['cut', 'ok']);
    } finally {
      network.heal(); // a failure here must not leave the next test behind a cut
    }
    expect([await a.dial(), await c.dial()]).toEqual(['ok', 'ok']);
  });

  it('refuses a dialler it cannot name while a cut stands, and lets it through once healed', async () => {
    expect(await stranger.dial()).toBe('ok');
    network.partition([['a'], ['b', 'c']]);
    try {
      expect(await stranger.dial()).toBe('cut');
    } finally {
      network.heal();
    }
    expect(await stranger.dial()).toBe('ok');
  });
});
