// The mutation self-test (`pnpm faults --mutants [--only id,id] [--no-baseline]`): copies the
// repository (sources, builds and node_modules, not .git or old runs) to a temporary directory,
// then for each planted bug of catalogue.mjs applies its edits there, rebuilds, runs its short
// fault runs (runs.ts) and requires the checker to flag it. First the same runs on the
// unmutated copy (the baseline: the suite must be green there, or a flag proves nothing).
// Prints the table (mutant → flagged by which property, in which runs) and writes it, with the
// details, under integration/.scratch/faults/. Exits 1 if a mutant went unflagged or the
// baseline was not green. CI does not run it: it takes several minutes.
import { spawnSync } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CONTROLS, MUTANTS } from './catalogue.mjs';

const repo = fileURLToPath(new URL('../../..', import.meta.url));
const args = process.argv.slice(2);
const only = args.includes('--only') ? args[args.indexOf('--only') + 1].split(',') : undefined;
const baseline = !args.includes('--no-baseline');
const SKIP = new Set(['.git', 'integration/.scratch', '.vitest-results.json']);

const work = await mkdtemp(join(tmpdir(), 'leasehold-mutants-'));
console.log(`[mutants] copying the repository to ${work}`);
await cp(repo, work, {
  recursive: true,
  verbatimSymlinks: true,
  filter: (src) => !SKIP.has(relative(repo, src)),
});

const build = () =>
  run('npx', [
    'tsc',
    '-b',
    'packages/core',
    'packages/testing',
    'packages/fence',
    'packages/cron',
    'packages/cli',
  ]);

function run(cmd, argv, env = {}) {
  const res = spawnSync(cmd, argv, {
    cwd: work,
    stdio: 'inherit',
    env: { ...process.env, ...env },
  });
  if (res.status !== 0) throw new Error(`${cmd} ${argv.join(' ')} exited with ${res.status}`);
}

/** Runs `runs` in the copy as it is now; resolves to their outcomes (see mutant.suite.ts). */
async function runs(id, names, extraEnv = {}) {
  const out = join(work, `mutant-${id}.json`);
  await rm(out, { force: true });
  const res = spawnSync(
    'npx',
    ['vitest', 'run', '--config', 'integration/faults/mutants/vitest.config.ts'],
    {
      cwd: work,
      stdio: 'inherit',
      env: {
        ...process.env,
        ...extraEnv,
        FAULTS_MUTANT: id,
        FAULTS_MUTANT_RUNS: names.join(','),
        FAULTS_MUTANT_OUT: out,
      },
    },
  );
  try {
    return JSON.parse(await readFile(out, 'utf8'));
  } catch {
    return [
      {
        run: names.join(','),
        flagged: { runner: 1 },
        examples: [],
        error: `vitest exited with ${res.status}, no outcome written`,
      },
    ];
  }
}

const rows = [];
const chosen = MUTANTS.filter((m) => !only || only.includes(m.id));
try {
  build();
  if (baseline) {
    const names = [...new Set(chosen.flatMap((m) => m.runs))];
    console.log(`[mutants] baseline: ${names.join(', ')} on the unmutated SDK`);
    rows.push({
      id: 'baseline',
      bug: 'none (the real SDK)',
      outcomes: await runs('baseline', names),
      expect: 'green',
    });
  }
  for (const mutant of chosen) {
    const file = join(work, mutant.file);
    const original = await readFile(file, 'utf8');
    let text = original;
    for (const [find, replace] of mutant.edits) {
      const count = text.split(find).length - 1;
      if (count !== 1) {
        throw new Error(
          `mutant ${mutant.id}: ${mutant.file} has ${count} copies of ${JSON.stringify(find)} (want 1): update catalogue.mjs`,
        );
      }
      text = text.replace(find, replace);
    }
    await writeFile(file, text);
    try {
      console.log(`[mutants] ${mutant.id}: ${mutant.bug}`);
      build();
      rows.push({ ...mutant, outcomes: await runs(mutant.id, mutant.runs), expect: 'flagged' });
    } finally {
      await writeFile(file, original);
    }
  }
  if (!only) {
    build();
    for (const control of CONTROLS) {
      rows.push({ ...control, outcomes: await runs(control.id, control.runs), expect: 'flagged' });
    }
  }
} finally {
  const table = render(rows);
  console.log(`\n${table}`);
  const dir = join(repo, 'integration', '.scratch', 'faults');
  await mkdir(dir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  await writeFile(join(dir, `mutants-${stamp}.md`), `${table}\n`);
  await writeFile(join(dir, `mutants-${stamp}.json`), `${JSON.stringify(rows, null, 2)}\n`);
  console.log(
    `[mutants] table and details in ${dir}/mutants-${stamp}.{md,json}; runs under ${work}/integration/.scratch/faults`,
  );
}
const bad = rows.filter((r) => verdict(r) !== 'ok');
process.exit(bad.length > 0 ? 1 : 0);

function flaggedBy(row) {
  const all = {};
  for (const o of row.outcomes)
    for (const [k, n] of Object.entries(o.flagged)) all[k] = (all[k] ?? 0) + n;
  return all;
}

function verdict(row) {
  const flagged = Object.keys(flaggedBy(row)).length > 0;
  if (row.expect === 'green') return flagged ? 'NOT GREEN' : 'ok';
  return flagged ? 'ok' : 'MISSED';
}

function render(list) {
  const lines = [
    '| mutant | planted bug | flagged by (violations) | runs (seed) | verdict |',
    '|---|---|---|---|---|',
  ];
  for (const row of list) {
    const by = Object.entries(flaggedBy(row))
      .sort(([, a], [, b]) => b - a)
      .map(([k, n]) => `${k} ×${n}`)
      .join(', ');
    const seeds = row.outcomes.map((o) => `${o.run} (${o.seed ?? 'no run'})`).join(', ');
    lines.push(
      `| ${row.id} | ${row.bug} | ${by || '—'} | ${seeds} | ${verdict(row) === 'ok' ? (row.expect === 'green' ? 'green' : 'flagged') : verdict(row)} |`,
    );
  }
  return lines.join('\n');
}
