import { createHash } from 'node:crypto';
import { mkdtemp, open, readFile, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EtcdHarnessError } from './errors.js';
import { trackTempDir, untrackTempDir } from './process-registry.js';

/** Deadline for downloading one snapshot. */
export const SNAPSHOT_TIMEOUT_MS = 30_000;
/** etcd appends the SHA-256 of the bolt database to the snapshot stream. */
const HASH_BYTES = 32;

/**
 * Saves `clientUrl`'s snapshot to `file`. This is the Maintenance.Snapshot RPC that
 * `etcdctl snapshot save` calls, through etcd's gRPC gateway (`POST /v3/maintenance/snapshot`,
 * one JSON message per line, the bytes base64 in `result.blob`), so no etcdctl is needed on the
 * host. The result is byte for byte what etcdctl writes: the database followed by its SHA-256,
 * which is checked here and again by `etcdctl snapshot restore`. Written to `file.part` first
 * and renamed, like etcdctl.
 */
export async function saveSnapshot(
  clientUrl: string,
  file: string,
  what: string,
  timeoutMs = SNAPSHOT_TIMEOUT_MS,
  /** Extra request headers: root's token when authentication is on. */
  headers: Record<string, string> = {},
): Promise<void> {
  const part = `${file}.part`;
  const signal = AbortSignal.timeout(timeoutMs);
  const fail = (detail: string, cause?: unknown) =>
    new EtcdHarnessError(
      'ETCD_SNAPSHOT_FAILED',
      `could not save a snapshot of ${what} at ${clientUrl}: ${detail}`,
      { cause },
    );
  const handle = await open(part, 'w', 0o600);
  try {
    let response: Response;
    try {
      response = await fetch(`${clientUrl}/v3/maintenance/snapshot`, {
        method: 'POST',
        body: '{}',
        headers: { 'content-type': 'application/json', ...headers },
        signal,
      });
    } catch (error) {
      throw fail(`${describe(error, timeoutMs)} (is the member stopped?)`, error);
    }
    if (!response.ok || !response.body) {
      throw fail(`HTTP ${response.status} ${await response.text().catch(() => '')}`.trim());
    }
    const hash = createHash('sha256');
    // The last 32 bytes seen so far; everything before them is database.
    let tail = Buffer.alloc(0);
    let pending = '';
    const decoder = new TextDecoder();
    const take = async (line: string) => {
      if (line.trim() === '') return;
      const message = JSON.parse(line) as {
        result?: { blob?: string };
        error?: { message?: string };
      };
      if (message.error) throw fail(`etcd reported: ${message.error.message ?? line}`);
      const blob = Buffer.from(message.result?.blob ?? '', 'base64');
      if (blob.length === 0) return;
      await handle.write(blob);
      const joined = Buffer.concat([tail, blob]);
      const cut = Math.max(0, joined.length - HASH_BYTES);
      hash.update(joined.subarray(0, cut));
      tail = joined.subarray(cut);
    };
    try {
      for await (const chunk of response.body) {
        pending += decoder.decode(chunk as Uint8Array, { stream: true });
        const lines = pending.split('\n');
        pending = lines.pop() ?? '';
        for (const line of lines) await take(line);
      }
      await take(pending + decoder.decode());
    } catch (error) {
      if (error instanceof EtcdHarnessError) throw error;
      throw fail(`the snapshot stream broke off: ${describe(error, timeoutMs)}`, error);
    }
    if (tail.length < HASH_BYTES || !hash.digest().equals(tail)) {
      throw fail('the snapshot is truncated or corrupt (its SHA-256 does not match)');
    }
    await handle.sync();
  } catch (error) {
    await handle.close().catch(() => {});
    await rm(part, { force: true });
    throw error;
  }
  await handle.close();
  await rename(part, file);
}

/** Rejects unless `file` is a readable snapshot whose trailing SHA-256 matches its contents. */
export async function checkSnapshotFile(file: string): Promise<void> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (error) {
    throw new EtcdHarnessError(
      'ETCD_INVALID_OPTION',
      `cannot restore from "${file}": ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
  const body = bytes.subarray(0, Math.max(0, bytes.length - HASH_BYTES));
  const sum = bytes.subarray(body.length);
  if (sum.length < HASH_BYTES || !createHash('sha256').update(body).digest().equals(sum)) {
    throw new EtcdHarnessError(
      'ETCD_INVALID_OPTION',
      `cannot restore from "${file}": it is not an etcd snapshot, or it is truncated ` +
        '(its trailing SHA-256 does not match). Use a file from member.snapshot() or `etcdctl snapshot save`',
    );
  }
}

/** Snapshot files of one cluster, in a temp dir made on first use and removed by `dispose`. */
export class SnapshotFiles {
  private dir: Promise<string> | undefined;
  private count = 0;
  private disposed = false;

  async next(memberName: string): Promise<string> {
    if (this.disposed) {
      throw new EtcdHarnessError(
        'ETCD_INVALID_OPTION',
        `cannot save a snapshot of ${memberName}: the cluster is closed`,
      );
    }
    this.dir ??= mkdtemp(join(tmpdir(), 'leasehold-etcd-snapshots-')).then((dir) => {
      trackTempDir(dir);
      return dir;
    });
    const dir = await this.dir;
    this.count += 1;
    return join(dir, `${memberName}-${this.count}.db`);
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    const dir = await this.dir?.catch(() => undefined);
    if (dir === undefined) return;
    await rm(dir, { recursive: true, force: true });
    untrackTempDir(dir);
  }
}

function describe(error: unknown, timeoutMs: number): string {
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) {
    return `no complete answer within ${timeoutMs} ms`;
  }
  const cause = error instanceof Error ? (error.cause as { code?: string } | undefined) : undefined;
  const message = error instanceof Error ? error.message : String(error);
  return cause?.code ? `${message} (${cause.code})` : message;
}
