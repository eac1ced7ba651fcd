/**
 * The resources a fault run writes to: @leasehold/fence on PostgreSQL, Redis and memory. Each
 * appends every write it accepts to a log of its own, atomically with the write (PostgreSQL: in
 * the fence's transaction, a bigserial orders it; Redis: in the fence's Lua script, an RPUSH;
 * memory: in the fence's synchronous step), so the log is the resource's commit order for the
 * checker. Memory lives in the runner behind a small HTTP endpoint the workers post to.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import { isStaleTokenError } from '@leasehold/fence';
import { withFence, type MemoryState } from '@leasehold/fence/memory';
import { fenceTableDDL, type PgQueryable } from '@leasehold/fence/postgres';
import { Redis } from 'ioredis';
import type { LogEntry } from './check/index.js';

export type ResourceName = 'memory' | 'postgres' | 'redis';

/** What the workers need to reach the resources (part of their FAULTS_CONFIG). */
export interface ResourceEndpoints {
  memory?: string;
  postgres?: { url: string; fenceTable: string; logTable: string };
  redis?: { url: string; prefix: string };
}

const require = createRequire(import.meta.url);
type PgPool = Extract<PgQueryable, { totalCount: number }> & { end(): Promise<void> };
const pg = require('pg') as {
  Pool: new (config: { connectionString: string; max?: number }) => PgPool;
};

const PROBE_TIMEOUT_MS = 2_000;

export class Resources {
  private constructor(
    readonly endpoints: ResourceEndpoints,
    /** Why a resource is not used in this run (no server answered), by resource. */
    readonly missing: Partial<Record<ResourceName, string>>,
    private readonly memory: { server: Server; log: LogEntry[] } | undefined,
    private readonly pool: PgPool | undefined,
    private readonly schema: string | undefined,
    private readonly redis: Redis | undefined,
  ) {}

  /** Opens the resources asked for; PostgreSQL or Redis without a server are left out, with why. */
  static async open(wanted: readonly ResourceName[], label: string): Promise<Resources> {
    const id = `${label.replace(/[^a-z0-9]+/gi, '_').toLowerCase()}_${randomBytes(4).toString('hex')}`;
    const endpoints: ResourceEndpoints = {};
    const missing: Partial<Record<ResourceName, string>> = {};
    let memory: { server: Server; log: LogEntry[] } | undefined;
    let pool: PgPool | undefined;
    let schema: string | undefined;
    let redis: Redis | undefined;
    if (wanted.includes('memory')) {
      memory = await startMemory();
      const address = memory.server.address();
      endpoints.memory = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    }
    if (wanted.includes('postgres')) {
      const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
      try {
        pool = new pg.Pool({ connectionString: url, max: 2 });
        schema = `faults_${id}`;
        await withTimeout(pool.query(`CREATE SCHEMA "${schema}"`), 'PostgreSQL');
        const logTable = `"${schema}".log`;
        await pool.query(fenceTableDDL({ table: `${schema}.fence` }));
        await pool.query(
          `CREATE TABLE ${logTable} (seq bigserial PRIMARY KEY, name text NOT NULL, token int8 NOT NULL, write_id text NOT NULL, process text NOT NULL)`,
        );
        endpoints.postgres = { url, fenceTable: `${schema}.fence`, logTable };
      } catch (err) {
        await pool?.end().catch(() => {});
        pool = undefined;
        schema = undefined;
        missing.postgres = `PostgreSQL at ${url}: ${(err as Error).message} (set DATABASE_URL)`;
      }
    }
    if (wanted.includes('redis')) {
      const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
      redis = new Redis(url, {
        lazyConnect: true,
        connectTimeout: PROBE_TIMEOUT_MS,
        maxRetriesPerRequest: 1,
      });
      redis.on('error', () => {});
      try {
        await withTimeout(redis.connect(), 'Redis');
        endpoints.redis = { url, prefix: `faults:${id}:` };
      } catch (err) {
        redis.disconnect();
        redis = undefined;
        missing.redis = `Redis at ${url}: ${(err as Error).message} (set REDIS_URL)`;
      }
    }
    return new Resources(endpoints, missing, memory, pool, schema, redis);
  }

  /** The resources in use. */
  get names(): ResourceName[] {
    return (['memory', 'postgres', 'redis'] as const).filter((r) => this.endpoints[r]);
  }

  /** Every resource's log of accepted writes, in commit order. */
  async logs(): Promise<Record<string, LogEntry[]>> {
    const logs: Record<string, LogEntry[]> = {};
    if (this.memory) logs.memory = [...this.memory.log];
    if (this.pool && this.endpoints.postgres) {
      const { rows } = await this.pool.query<{
        seq: string;
        name: string;
        token: string;
        write_id: string;
        process: string;
      }>(
        `SELECT seq::text AS seq, name, token::text AS token, write_id, process FROM ${this.endpoints.postgres.logTable} AS l ORDER BY l.seq`,
      );
      logs.postgres = rows.map((r) => ({
        seq: Number(r.seq),
        name: r.name,
        token: r.token,
        writeId: r.write_id,
        process: r.process,
      }));
    }
    if (this.redis && this.endpoints.redis) {
      const raw = await this.redis.lrange(`${this.endpoints.redis.prefix}log`, 0, -1);
      logs.redis = raw.map((line, i) => ({
        seq: i + 1,
        ...(JSON.parse(line) as Omit<LogEntry, 'seq'>),
      }));
    }
    return logs;
  }

  /** Removes the run's schema, keys and the memory endpoint. */
  async close(): Promise<void> {
    if (this.memory) {
      const { server } = this.memory;
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
    }
    if (this.pool) {
      await this.pool.query(`DROP SCHEMA IF EXISTS "${this.schema}" CASCADE`).catch(() => {});
      await this.pool.end().catch(() => {});
    }
    if (this.redis && this.endpoints.redis) {
      const keys = await this.redis.keys(`${this.endpoints.redis.prefix}*`).catch(() => []);
      if (keys.length > 0) await this.redis.del(...keys).catch(() => {});
      this.redis.disconnect();
    }
  }
}

interface MemoryWrite {
  name: string;
  token: string;
  writeId: string;
  process: string;
  fenced: boolean;
}

/**
 * memoryStore's fence behind HTTP: the check, the log append and the token's advance happen in
 * one synchronous step of this process, which is what makes the memory fence atomic.
 */
async function startMemory(): Promise<{ server: Server; log: LogEntry[] }> {
  const state: MemoryState = new Map();
  const log: LogEntry[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const reply = (status: number, body: object) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      let write: MemoryWrite;
      try {
        write = JSON.parse(Buffer.concat(chunks).toString()) as MemoryWrite;
      } catch {
        return reply(400, { error: 'bad json' });
      }
      const entry = (): LogEntry => ({
        seq: log.length + 1,
        name: write.name,
        token: write.token,
        writeId: write.writeId,
        process: write.process,
      });
      try {
        if (write.fenced) {
          withFence(state, { resource: write.name, token: write.token }, () => log.push(entry()));
        } else {
          log.push(entry());
        }
        reply(200, { ok: true });
      } catch (err) {
        if (isStaleTokenError(err)) {
          reply(409, { stale: true, highest: String(err.highestToken) });
        } else {
          reply(400, { error: String(err) });
        }
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, log };
}

async function withTimeout<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`${what} did not answer within ${PROBE_TIMEOUT_MS} ms`)),
          PROBE_TIMEOUT_MS,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
