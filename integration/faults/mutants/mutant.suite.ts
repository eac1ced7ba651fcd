/**
 * One mutant's runs, for the mutation self-test (main.mjs runs this file in a copy of the repo
 * with one bug planted): the runs named in FAULTS_MUTANT_RUNS, each checked as usual, their
 * violations by rule and kind written to FAULTS_MUTANT_OUT. It records and does not judge: the
 * self-test decides whether the mutant was flagged.
 */
import { writeFile } from 'node:fs/promises';
import { afterAll, describe, it } from 'vitest';
import { runFaults } from '../runner.js';
import { RUNS, type RunName } from './runs.js';

const mutant = process.env.FAULTS_MUTANT ?? 'none';
const names = (process.env.FAULTS_MUTANT_RUNS ?? '').split(',').filter(Boolean) as RunName[];
const out = process.env.FAULTS_MUTANT_OUT;

interface Outcome {
  run: string;
  seed?: number;
  dir?: string;
  summary?: string;
  /** `S6:lock` → count. */
  flagged: Record<string, number>;
  examples: string[];
  error?: string;
}
const outcomes: Outcome[] = [];

describe(`mutant ${mutant}`, () => {
  afterAll(async () => {
    if (out) await writeFile(out, `${JSON.stringify(outcomes, null, 2)}\n`);
  });
  for (const name of names) {
    it(name, { timeout: 8 * 60_000 }, async () => {
      const options = RUNS[name];
      if (!options) throw new Error(`no run named ${name} in runs.ts`);
      try {
        const run = await runFaults({ ...options, label: `mutant-${mutant}-${name}` });
        const flagged: Record<string, number> = {};
        for (const v of run.violations) {
          const key = v.kind ? `${v.rule}:${v.kind}` : v.rule;
          flagged[key] = (flagged[key] ?? 0) + 1;
        }
        outcomes.push({
          run: name,
          seed: run.seed,
          dir: run.dir,
          summary: run.result.summary,
          flagged,
          examples: run.violations.slice(0, 3).map((v) => `${v.rule}: ${v.message}`),
        });
      } catch (err) {
        // A run the bug wrecks (no progress at all) is flagged too: by the runner itself.
        outcomes.push({ run: name, flagged: { runner: 1 }, examples: [], error: String(err) });
      }
    });
  }
});
