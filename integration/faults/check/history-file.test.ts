import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseHistory, readHistory } from './history-file.js';

const line = (at: number, process = 'w1') =>
  JSON.stringify({ at, process, type: 'info', op: 'deadline' });

describe('readHistory', () => {
  it('reads JSONL and drops a last line truncated by a kill', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'history-'));
    try {
      const path = join(dir, 'history.jsonl');
      await writeFile(path, `${line(1)}\n\n${line(2)}\n${line(3).slice(0, 17)}`);
      expect((await readHistory(path)).map((l) => l.at)).toEqual([1, 2]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('keeps the whole line glued to a truncated one in the middle', () => {
    const text = [line(1), `${line(2).slice(0, 12)}${line(3, 'w2')}`, line(4)].join('\n');
    expect(parseHistory(text).map((l) => [l.at, l.process])).toEqual([
      [1, 'w1'],
      [3, 'w2'],
      [4, 'w1'],
    ]);
  });

  it('refuses garbage in the middle, naming the line', () => {
    expect(() => parseHistory(`${line(1)}\nnot json\n${line(2)}`, 'h.jsonl')).toThrow(
      /h\.jsonl:2: not a history line/,
    );
    expect(() =>
      parseHistory(`${line(1)}\n{"at":"soon","process":"w1","type":"ok"}\n${line(2)}`),
    ).toThrow(/:2:/);
  });
});
