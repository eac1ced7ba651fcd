import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tarOneFile } from './tar.js';

describe('tarOneFile', () => {
  it('writes an archive that tar(1) extracts byte for byte', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'leasehold-tar-'));
    try {
      const content = Buffer.from(Array.from({ length: 1500 }, (_, i) => i % 251));
      await writeFile(join(dir, 'a.tar'), tarOneFile('snap.db', content));
      execFileSync('tar', ['-xf', 'a.tar'], { cwd: dir });
      expect((await readFile(join(dir, 'snap.db'))).equals(content)).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
