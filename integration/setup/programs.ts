/**
 * Documentation examples are programs: these helpers type-check a snippet as if it were a file in
 * a given package (so its imports resolve as a user's would) and run it with Node.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** TypeScript's errors for `code` placed in `dir` (strict, NodeNext, like the packages). */
export function typeErrors(code: string, dir: string): string[] {
  const file = join(dir, 'readme-example.mts');
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2022.d.ts', 'lib.esnext.disposable.d.ts'],
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: ['node'],
  };
  const host = ts.createCompilerHost(options);
  const onDisk = { ...host };
  host.getCurrentDirectory = () => root;
  host.fileExists = (name) => name === file || onDisk.fileExists(name);
  host.readFile = (name) => (name === file ? code : onDisk.readFile(name));
  host.getSourceFile = (name, version, ...rest) =>
    name === file
      ? ts.createSourceFile(name, code, version)
      : onDisk.getSourceFile(name, version, ...rest);
  const program = ts.createProgram([file], options, host);
  return ts
    .getPreEmitDiagnostics(program)
    .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
}

/**
 * Runs TypeScript (or JavaScript) module source with Node from `dir`, where its imports resolve.
 * `await using` is down-levelled for Node 20 as the README tells users to do.
 */
export function runModule(
  source: string,
  dir: string,
  env: Record<string, string>,
): Promise<{ code: number | null; output: string }> {
  const js = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  }).outputText;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module'], {
      cwd: dir,
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, output }));
    child.stdin.end(js);
  });
}
