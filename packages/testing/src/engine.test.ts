import { createServer, type Server } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { findEngine, ping, toRequestTarget } from './engine.js';

describe('toRequestTarget', () => {
  it('understands unix, tcp and http DOCKER_HOST values', () => {
    expect(toRequestTarget('unix:///run/podman/podman.sock')).toEqual({
      socketPath: '/run/podman/podman.sock',
    });
    expect(toRequestTarget('tcp://10.0.0.1:2376')).toEqual({ host: '10.0.0.1', port: 2376 });
    expect(toRequestTarget('http://docker')).toEqual({ host: 'docker', port: 2375 });
    expect(toRequestTarget('npipe:////./pipe/docker_engine')).toBeUndefined();
  });
});

describe('findEngine', () => {
  let server: Server | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    if (dir) await rm(dir, { recursive: true, force: true });
    server = undefined;
  });

  async function fakeEngine(status: number): Promise<string> {
    dir = await mkdtemp(join(tmpdir(), 'leasehold-engine-'));
    const socket = join(dir, 'engine.sock');
    server = createServer((req, res) => {
      res.statusCode = req.url === '/_ping' ? status : 404;
      res.end('OK');
    });
    await new Promise<void>((resolve) => server!.listen(socket, resolve));
    return socket;
  }

  it('uses the first socket that answers /_ping when DOCKER_HOST is unset', async () => {
    const socket = await fakeEngine(200);
    expect(await findEngine({}, ['/nonexistent/docker.sock', socket])).toEqual({
      dockerHost: `unix://${socket}`,
    });
  });

  it('does not fall back to other sockets when DOCKER_HOST is set but dead', async () => {
    const socket = await fakeEngine(200);
    expect(await findEngine({ DOCKER_HOST: 'unix:///nonexistent.sock' }, [socket])).toBeUndefined();
  });

  it('treats a non-200 ping as no engine', async () => {
    const socket = await fakeEngine(500);
    expect(await ping(`unix://${socket}`)).toBe(false);
  });
});
