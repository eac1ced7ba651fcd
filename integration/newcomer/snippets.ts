/**
 * The ```ts blocks of the package READMEs, as a reader copies them. A block may be left out by an
 * HTML comment on the line before it (blank lines between are fine) that says why:
 * `<!-- newcomer: skip (reason) -->`.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const PACKAGES = ['core', 'fence', 'cron', 'testing', 'cli'] as const;
export type PackageName = (typeof PACKAGES)[number];

export interface Snippet {
  pkg: PackageName;
  /** `packages/<pkg>/README.md`. */
  readme: string;
  /** Line of the opening fence, 1-based. */
  line: number;
  /** The nearest heading above the block, without its `#`s. */
  heading: string;
  code: string;
  /** The file it is compiled as, relative to the project's `src/`. */
  file: string;
}

export interface Skipped {
  readme: string;
  line: number;
  reason: string;
}

const SKIP = /^<!--\s*newcomer:\s*skip\s*\((.+)\)\s*-->$/;

export function readmePath(pkg: PackageName): string {
  return fileURLToPath(new URL(`../../packages/${pkg}/README.md`, import.meta.url));
}

/** Every ```ts block of one README, and the ones a marker leaves out. */
export function snippetsOf(
  pkg: PackageName,
  text: string,
): { snippets: Snippet[]; skipped: Skipped[] } {
  const readme = `packages/${pkg}/README.md`;
  const lines = text.split('\n');
  const snippets: Snippet[] = [];
  const skipped: Skipped[] = [];
  let heading = '';
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^#{1,6} /.test(line)) heading = line.replace(/^#+ /, '');
    if (/^```/.test(line) && line.trim() !== '```ts') {
      // Skip over other fences whole, so a "# comment" inside a sh block is not a heading.
      const end = lines.findIndex((l, j) => j > i && l.trim() === '```');
      i = end < 0 ? lines.length : end;
      continue;
    }
    if (line.trim() !== '```ts') continue;
    const end = lines.findIndex((l, j) => j > i && l.trim() === '```');
    if (end < 0) throw new Error(`${readme}:${i + 1}: unterminated \`\`\`ts block`);
    let before = i - 1;
    while (before >= 0 && lines[before]!.trim() === '') before--;
    const marker = before >= 0 ? SKIP.exec(lines[before]!.trim()) : null;
    if (marker) skipped.push({ readme, line: i + 1, reason: marker[1]! });
    else {
      snippets.push({
        pkg,
        readme,
        line: i + 1,
        heading,
        code: `${lines.slice(i + 1, end).join('\n')}\n`,
        file: `${pkg}-readme-line-${i + 1}.ts`,
      });
    }
    i = end;
  }
  return { snippets, skipped };
}

export function allSnippets(): { snippets: Snippet[]; skipped: Skipped[] } {
  const all = PACKAGES.map((pkg) => snippetsOf(pkg, readFileSync(readmePath(pkg), 'utf8')));
  return { snippets: all.flatMap((a) => a.snippets), skipped: all.flatMap((a) => a.skipped) };
}

/**
 * The ```json blocks of core's Install section: the minimal package.json and tsconfig.json the
 * README tells a newcomer to use.
 */
export function installFiles(): {
  packageJson: Record<string, unknown>;
  tsconfig: Record<string, unknown>;
} {
  const text = readFileSync(readmePath('core'), 'utf8');
  const section = /\n## Install\n([\s\S]*?)\n## /.exec(text)?.[1];
  if (!section) throw new Error('packages/core/README.md has no "## Install" section');
  const blocks = [...section.matchAll(/```json\n([\s\S]*?)```/g)].map(
    (m) => JSON.parse(m[1]!) as Record<string, unknown>,
  );
  const packageJson = blocks.find((b) => 'type' in b);
  const tsconfig = blocks.find((b) => 'compilerOptions' in b);
  if (!packageJson || !tsconfig) {
    throw new Error("core's Install section needs a package.json and a tsconfig.json block");
  }
  return { packageJson, tsconfig };
}

/** `file(line,col): error TSnnnn: …` lines of tsc, as README places: which snippet, which line. */
export function locateErrors(output: string, snippets: readonly Snippet[]): string[] {
  const byFile = new Map(snippets.map((s) => [s.file, s]));
  const located: string[] = [];
  for (const line of output.split('\n')) {
    const m = /^src\/([^(]+)\((\d+),(\d+)\): (error .*)$/.exec(line.trim());
    if (!m) {
      if (/error TS/.test(line)) located.push(line.trim());
      continue;
    }
    const snippet = byFile.get(m[1]!);
    if (!snippet) {
      located.push(line.trim());
      continue;
    }
    const readmeLine = snippet.line + Number(m[2]);
    located.push(
      `${snippet.readme}:${readmeLine} (the block at line ${snippet.line}, under "${snippet.heading}"): ${m[4]!}`,
    );
  }
  return located;
}
