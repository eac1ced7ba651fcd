import { EtcdHarnessError } from './errors.js';

/** Deadline for each call of the set-up. */
const CALL_TIMEOUT_MS = 10_000;

/**
 * One call to etcd's gRPC gateway (`POST /v3/<path>`, JSON in and out): the same RPCs etcdctl
 * sends, without needing etcdctl on the host or in the image.
 */
async function gateway(
  url: string,
  path: string,
  body: object,
  headers: Record<string, string> = {},
): Promise<Record<string, unknown>> {
  const what = `POST ${url}/v3/${path}`;
  let response: Response;
  try {
    response = await fetch(`${url}/v3/${path}`, {
      method: 'POST',
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json', ...headers },
      signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
    });
  } catch (error) {
    throw new EtcdHarnessError('ETCD_STARTUP_FAILED', `${what} failed: ${String(error)}`, {
      cause: error,
    });
  }
  const text = await response.text();
  if (!response.ok) {
    throw new EtcdHarnessError(
      'ETCD_STARTUP_FAILED',
      `${what} was refused: HTTP ${response.status} ${text}`.trim(),
    );
  }
  return JSON.parse(text) as Record<string, unknown>;
}

/**
 * What `etcdctl user add root`, `etcdctl user grant-role root root` and `etcdctl auth enable`
 * do: etcd refuses to enable authentication until user `root` holds role `root`.
 */
export async function enableAuth(url: string, rootPassword: string): Promise<void> {
  await gateway(url, 'auth/user/add', { name: 'root', password: rootPassword });
  await gateway(url, 'auth/role/add', { name: 'root' });
  await gateway(url, 'auth/user/grant', { user: 'root', role: 'root' });
  await gateway(url, 'auth/enable', {});
}

/**
 * Headers that make a gateway call as root (snapshots need root once authentication is on):
 * etcd reads the token from the `authorization` header.
 */
export async function rootHeaders(
  url: string,
  rootPassword: string,
): Promise<Record<string, string>> {
  const res = await gateway(url, 'auth/authenticate', { name: 'root', password: rootPassword });
  if (typeof res.token !== 'string') {
    throw new EtcdHarnessError(
      'ETCD_STARTUP_FAILED',
      `etcd at ${url} answered authenticate without a token: ${JSON.stringify(res)}`,
    );
  }
  return { authorization: res.token };
}
