import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { delimiter, dirname, isAbsolute, join } from 'node:path';

/**
 * Resolves the etcd executable: an explicit path (or ETCD_BIN) must exist and be executable;
 * otherwise `etcd` is looked up on PATH. Undefined when nothing usable is found.
 */
export async function findEtcdBinary(
  explicit: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string | undefined> {
  if (explicit !== undefined) {
    if (isAbsolute(explicit) || explicit.includes('/')) {
      return (await isExecutable(explicit)) ? explicit : undefined;
    }
    return searchPath(explicit, env.PATH);
  }
  return searchPath('etcd', env.PATH);
}

/**
 * The etcdctl for snapshot restores: the one next to the etcd binary (same release), else
 * `etcdctl` on PATH. Undefined when there is none.
 */
export async function findEtcdctl(
  etcdBinary: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string | undefined> {
  const sibling = join(dirname(etcdBinary), 'etcdctl');
  if (await isExecutable(sibling)) return sibling;
  return searchPath('etcdctl', env.PATH);
}

async function searchPath(name: string, path: string | undefined): Promise<string | undefined> {
  for (const dir of (path ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, name);
    if (await isExecutable(candidate)) return candidate;
  }
  return undefined;
}

async function isExecutable(file: string): Promise<boolean> {
  try {
    await access(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
