/**
 * examples/cron-replicas does what its comments say, for real against the run's etcd and
 * PostgreSQL: one command starts three replicas; each fire of the job runs on exactly one of them
 * and writes one row fenced by its token; SIGTERM stops all three cleanly.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { describeWith, findPostgres, ownSchema } from '../fence/stores.js';

const dir = fileURLToPath(new URL('../../examples/cron-replicas/', import.meta.url));
const files = { replica: `${dir}replica.mjs`, run: `${dir}run.mjs` };
const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());

/** TypeScript's errors for the example's JavaScript, checked against the packages' types. */
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

const postgres = await findPostgres();

describeWith(postgres, 'examples/cron-replicas', (url) => {
  const schema = ownSchema(url, 'cron_example');

  it('type-checks as JavaScript against the packages', () => {
    expect(jsTypeErrors([files.replica, files.run])).toEqual([]);
  }, 30_000);

  it('three replicas from one command: each fire runs once and writes one fenced row; SIGTERM stops all', async () => {
    const prefix = uniquePrefix('cron-example');
    const run = spawn(process.execPath, [files.run], {
      env: {
        ...process.env,
        ETCD_ENDPOINTS: endpoints.join(','),
        CRON_PREFIX: prefix,
        DATABASE_URL: schema.url,
        VALUE_TABLE: 'report_runs',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group: a failed test kills runner and replicas together
    });
    let output = '';
    run.stdout.on('data', (d: Buffer) => (output += d.toString()));
    run.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => run.once('exit', resolve));
    const ran = () => [...output.matchAll(/\[(\w)\] ran (\S+) with token (\d+)/g)];
    try {
      await waitFor(() => new Set(ran().map((m) => m[2])).size >= 8, {
        timeoutMs: 40_000,
        what: `8 fires run; output so far:\n${output}`,
      });
      run.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (run.exitCode === null) process.kill(-run.pid!, 'SIGKILL');
      await admin.delete().prefix(prefix);
    }
    for (const name of ['a', 'b', 'c']) expect(output).toContain(`[${name}] stopped`);
    const runs = ran();
    const fires = runs.map((m) => m[2]!);
    expect(new Set(fires).size).toBe(fires.length); // no fire ran twice
    const { rows } = await schema
      .admin()
      .query<{ resource: string; value: string; token: string }>(
        `SELECT resource, value, fence::text AS token FROM "${schema.name}".report_runs`,
      );
    for (const [, name, fire, token] of runs) {
      const row = rows.find((r) => r.resource === `report ${fire}`);
      expect(row, `row of ${fire}`).toEqual({
        resource: `report ${fire}`,
        value: `written by ${name}`,
        token,
      });
    }
  }, 90_000);
});
