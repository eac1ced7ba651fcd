import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

interface Mutant {
  id: string;
  file: string;
  edits: [string, string][];
  runs: string[];
}
// The catalogue is plain JavaScript (main.mjs runs it without a build): its shape, as it declares.
const catalogue = './catalogue.mjs';
const { MUTANTS } = (await import(catalogue)) as { MUTANTS: Mutant[] };
const repo = fileURLToPath(new URL('../../..', import.meta.url));

// The self-test is too slow for CI, so a refactor that moves the code a mutant plants into would
// go unnoticed until someone runs it: every planted edit must still find its text exactly once.
describe('the mutation catalogue', () => {
  it.each(MUTANTS.map((m) => [m.id, m] as const))(
    '%s still plants into today’s code',
    async (_, m) => {
      const source = await readFile(`${repo}/${m.file}`, 'utf8');
      for (const [text, replacement] of m.edits) {
        expect(source.split(text).length - 1, `"${text}" in ${m.file}`).toBe(1);
        expect(replacement).not.toBe(text);
      }
      expect(m.runs.length, 'runs that reach the state where the bug shows').toBeGreaterThan(0);
    },
  );
});
