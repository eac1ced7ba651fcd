/**
 * Bad input gets a typed InvalidArgumentError at the call. Durations handed to gRPC as deadlines
 * (callTimeoutMs, dialTimeoutMs) have an upper bound: grpc-js cannot encode a deadline more than
 * 10^8 hours away and throws from inside its own promise chain, which would kill the process.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { sharedEndpoints, uniquePrefix } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const script = fileURLToPath(new URL('./workers/huge-timeout-worker.mjs', import.meta.url));

describe('huge but finite durations', () => {
  for (const option of ['callTimeoutMs', 'dialTimeoutMs']) {
    it(`${option}: 4e14 is rejected with InvalidArgumentError or works; it never crashes the process`, () => {
      const run = spawnSync(
        process.execPath,
        [script, endpoints.join(','), option, '4e14', uniquePrefix(`adv-huge-${option}`)],
        { encoding: 'utf8', timeout: 30_000 },
      );
      const firstErrorLine = run.stderr.split('\n').find((l) => /Error/.test(l)) ?? '';
      console.log(
        `[huge-${option}] exit ${run.status} signal ${run.signal}; stdout ${JSON.stringify(run.stdout.trim())}; stderr: ${firstErrorLine.trim()}`,
      );
      expect(run.status).toBe(0);
      expect(run.stdout).toMatch(/^(invalid|acquired)/);
    });
  }
});
