import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { freePort } from './free-port.js';
import { parseTarget, TcpFaultProxy, type TcpFaultProxyOptions } from './tcp-fault-proxy.js';

// A real echo server on loopback; the proxy sits between it and a plain TCP client.
let echo: Server;
let echoPort: number;
let proxy: TcpFaultProxy;
const clients: Socket[] = [];

beforeEach(async () => {
  echo = createServer((socket) => {
    socket.on('error', () => {});
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  echoPort = (echo.address() as { port: number }).port;
  proxy = await TcpFaultProxy.start({ target: `127.0.0.1:${echoPort}` });
});

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  await proxy.close();
  await new Promise<void>((resolve) => echo.close(() => resolve()));
});

interface Client {
  socket: Socket;
  received: () => string;
  closed: Promise<string>;
}

async function client(): Promise<Client> {
  const socket = connect(proxy.port, '127.0.0.1');
  clients.push(socket);
  let data = '';
  socket.on('data', (chunk: Buffer) => (data += chunk.toString()));
  const closed = new Promise<string>((resolve) => {
    socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    socket.on('close', () => resolve('close'));
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return { socket, received: () => data, closed };
}

async function until(check: () => boolean, timeoutMs = 2000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`condition not met in ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('TcpFaultProxy', () => {
  it('listens on loopback and passes bytes through', async () => {
    expect(proxy.url).toBe(`http://127.0.0.1:${proxy.port}`);
    expect(proxy.mode).toBe('pass');
    const c = await client();
    c.socket.write('hello');
    await until(() => c.received() === 'hello');
  });

  it('stall holds traffic both ways, including new connections, then flushes in order', async () => {
    const c = await client();
    proxy.setMode('stall');
    c.socket.write('a');
    c.socket.write('b');
    const late = await client();
    late.socket.write('late');
    await settle(150);
    expect(c.received()).toBe('');
    expect(late.received()).toBe('');
    proxy.setMode('pass');
    await until(() => c.received() === 'ab' && late.received() === 'late');
  });

  it('delay forwards every chunk after delayMs, in order', async () => {
    const c = await client();
    proxy.setMode('delay', { delayMs: 150 });
    const sent = performance.now();
    c.socket.write('1');
    await settle(20);
    c.socket.write('2');
    await until(() => c.received() === '12');
    // Two hops through the proxy (request and echo), each delayed.
    expect(performance.now() - sent).toBeGreaterThanOrEqual(250);
  });

  it('reset kills open connections and resets new ones until the mode changes', async () => {
    const c = await client();
    proxy.setMode('reset');
    expect(await c.closed).toMatch(/ECONNRESET|close/);
    expect(proxy.connectionCount).toBe(0);

    const refused = connect(proxy.port, '127.0.0.1');
    clients.push(refused);
    const outcome = await new Promise<string>((resolve) => {
      refused.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
      refused.on('close', () => resolve('close'));
    });
    expect(outcome).toMatch(/ECONNRESET|close/);

    proxy.setMode('pass');
    const again = await client();
    again.socket.write('ok');
    await until(() => again.received() === 'ok');
  });

  it('resets the client when the target is down', async () => {
    const dead = await TcpFaultProxy.start({ target: 'http://127.0.0.1:1' });
    try {
      const socket = connect(dead.port, '127.0.0.1');
      clients.push(socket);
      const outcome = await new Promise<string>((resolve) => {
        socket.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
        socket.on('close', () => resolve('close'));
      });
      expect(outcome).toMatch(/ECONNRESET|close/);
    } finally {
      await dead.close();
    }
  });

  it('retarget resets open connections and sends new ones to the new target', async () => {
    const accepted: Socket[] = [];
    const other = createServer((socket) => {
      accepted.push(socket);
      socket.on('error', () => {});
      socket.on('data', (chunk: Buffer) => socket.write(`other:${chunk.toString()}`));
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    try {
      const before = await client();
      before.socket.write('a');
      await until(() => before.received() === 'a');
      proxy.retarget(`http://127.0.0.1:${(other.address() as { port: number }).port}`);
      expect(await before.closed).toMatch(/ECONNRESET|close/);
      const after = await client();
      after.socket.write('b');
      await until(() => after.received() === 'other:b');
      expect(() => proxy.retarget('no-port')).toThrow(TypeError);
      await expect(TcpFaultProxy.start('127.0.0.1:2379' as never)).rejects.toThrow(
        /^TcpFaultProxy.start options must be an object/,
      );
      await expect(
        TcpFaultProxy.start({ target: '127.0.0.1:2379', listenPrt: 1 } as never),
      ).rejects.toThrow(
        /^TcpFaultProxy\.start options\.listenPrt must be left out \(not an option; allowed: target, listenPort\), got number$/,
      );
    } finally {
      for (const socket of accepted) socket.destroy();
      await new Promise<void>((resolve) => other.close(() => resolve()));
    }
  });

  it('listens on listenPort when given one', async () => {
    const listenPort = await freePort();
    const options: Required<TcpFaultProxyOptions> = { target: `127.0.0.1:${echoPort}`, listenPort };
    const second = await TcpFaultProxy.start(options);
    try {
      expect(second.port).toBe(listenPort);
    } finally {
      await second.close();
    }
  });

  it('close is idempotent and closes open connections', async () => {
    const c = await client();
    await Promise.all([proxy.close(), proxy.close()]);
    await c.closed;
  });

  it('rejects invalid modes and delays', () => {
    expect(() => proxy.setMode('drop' as 'pass')).toThrow(/mode must be/);
    expect(() => proxy.setMode('delay', { delayMs: -1 })).toThrow(/delayMs/);
    expect(() => proxy.setMode({} as 'pass')).toThrow(/^mode must be .*, got \{\}$/);
    expect(() => proxy.setMode('delay', { delayMS: 100 } as never)).toThrow(
      /^setMode options\.delayMS must be left out \(not an option; allowed: delayMs\), got number$/,
    );
    expect(() => proxy.setMode('delay', { delayMS: null } as never)).toThrow(/, got null$/);
    expect(proxy.mode).toBe('pass');
  });

  it('refuses options that are not an object (a bare delay is not silently ignored)', () => {
    for (const bad of [500, '500', [500], null]) {
      expect(() => proxy.setMode('delay', bad as never)).toThrow(
        /^setMode options must be an object such as \{ delayMs: 100 \}, got /,
      );
    }
    expect(proxy.mode).toBe('pass');
  });
});

describe('parseTarget', () => {
  it('accepts host:port, http:// URLs and bracketed IPv6', () => {
    expect(parseTarget('127.0.0.1:2379')).toEqual({ host: '127.0.0.1', port: 2379 });
    expect(parseTarget('http://localhost:23791')).toEqual({ host: 'localhost', port: 23791 });
    expect(parseTarget('[::1]:2379')).toEqual({ host: '::1', port: 2379 });
    expect(() => parseTarget('localhost')).toThrow(/port/);
  });
});
