import { readFile } from 'node:fs/promises';
import type { HistoryLine } from './types.js';

/**
 * Reads history.jsonl. A process killed mid-line leaves a truncated line: at the end of the
 * file it is dropped; in the middle (another process appended after it) the complete line
 * glued to its tail is kept. Any other malformed line is an error naming its line number.
 */
export async function readHistory(path: string): Promise<HistoryLine[]> {
  return parseHistory(await readFile(path, 'utf8'), path);
}

export function parseHistory(text: string, source = 'history'): HistoryLine[] {
  const raw = text.split('\n');
  let last = raw.length - 1;
  while (last >= 0 && raw[last]?.trim() === '') last--;
  const out: HistoryLine[] = [];
  for (let i = 0; i <= last; i++) {
    const line = raw[i]?.trim() ?? '';
    if (line === '') continue;
    const parsed = parseLine(line) ?? salvage(line);
    if (parsed) {
      out.push(parsed);
      continue;
    }
    if (i === last) break; // truncated by a kill
    throw new Error(`${source}:${i + 1}: not a history line: ${line.slice(0, 120)}`);
  }
  return out;
}

function parseLine(line: string): HistoryLine | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Partial<HistoryLine>;
  if (typeof v.at !== 'number' || typeof v.process !== 'string' || typeof v.type !== 'string') {
    return undefined;
  }
  return v as HistoryLine;
}

/** A truncated line followed by a whole one on the same physical line: keep the whole one. */
function salvage(line: string): HistoryLine | undefined {
  for (let i = line.indexOf('{', 1); i > 0; i = line.indexOf('{', i + 1)) {
    const parsed = parseLine(line.slice(i));
    if (parsed) return parsed;
  }
  return undefined;
}
