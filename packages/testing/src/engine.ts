import { request } from 'node:http';

/** Where a Docker-compatible engine answered `/_ping`, as a DOCKER_HOST value. */
export interface EngineLocation {
  dockerHost: string;
}

const PING_TIMEOUT_MS = 2000;

/** Sockets tried when DOCKER_HOST is unset: Docker's default, then rootful Podman's. */
export const DEFAULT_ENGINE_SOCKETS = ['/var/run/docker.sock', '/run/podman/podman.sock'];

/**
 * Finds a reachable container engine. DOCKER_HOST wins when set (it is what testcontainers will
 * use, so a dead DOCKER_HOST means "no engine" rather than silently using another one).
 */
export async function findEngine(
  env: NodeJS.ProcessEnv = process.env,
  sockets: readonly string[] = DEFAULT_ENGINE_SOCKETS,
): Promise<EngineLocation | undefined> {
  const configured = env.DOCKER_HOST?.trim();
  if (configured) {
    return (await ping(configured)) ? { dockerHost: configured } : undefined;
  }
  for (const socket of sockets) {
    const dockerHost = `unix://${socket}`;
    if (await ping(dockerHost)) return { dockerHost };
  }
  return undefined;
}

/** `GET /_ping` on a `unix://` or `tcp://`/`http://` DOCKER_HOST; false on any error or timeout. */
export function ping(dockerHost: string): Promise<boolean> {
  const target = toRequestTarget(dockerHost);
  if (!target) return Promise.resolve(false);
  return new Promise((resolve) => {
    const req = request({ ...target, path: '/_ping', method: 'GET', timeout: PING_TIMEOUT_MS });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('timeout', () => req.destroy(new Error('ping timeout')));
    req.on('error', () => resolve(false));
    req.end();
  });
}

type RequestTarget = { socketPath: string } | { host: string; port: number };

export function toRequestTarget(dockerHost: string): RequestTarget | undefined {
  if (dockerHost.startsWith('unix://')) return { socketPath: dockerHost.slice('unix://'.length) };
  const match = /^(?:tcp|http):\/\/([^:/]+)(?::(\d+))?/.exec(dockerHost);
  if (!match?.[1]) return undefined;
  return { host: match[1], port: match[2] ? Number(match[2]) : 2375 };
}
