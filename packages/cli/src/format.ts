/** Text for people: durations, values from etcd made safe for a terminal, tables. */

/** `850ms`, `12s`, `3m04s`, `2h05m`, `3d04h`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '?';
  if (ms < 1_000) return `${Math.floor(ms)}ms`;
  const s = Math.floor(ms / 1_000);
  if (s < 60) return `${s}s`;
  const pad = (n: number) => String(n).padStart(2, '0');
  if (s < 3_600) return `${Math.floor(s / 60)}m${pad(s % 60)}s`;
  if (s < 86_400) return `${Math.floor(s / 3_600)}h${pad(Math.floor((s % 3_600) / 60))}m`;
  return `${Math.floor(s / 86_400)}d${pad(Math.floor((s % 86_400) / 3_600))}h`;
}

/**
 * A value read from etcd, safe to print on a terminal: anyone who can write a key chooses its
 * value, so control characters (escape sequences could rewrite the screen) are shown escaped,
 * and long values are cut to `max` characters.
 */
export function printable(value: string, max = 40): string {
  // eslint-disable-next-line no-control-regex
  const safe = value.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => {
    const code = c.charCodeAt(0);
    const named: Record<number, string> = { 9: '\\t', 10: '\\n', 13: '\\r' };
    return named[code] ?? `\\u${code.toString(16).padStart(4, '0')}`;
  });
  const chars = [...safe];
  return chars.length > max ? `${chars.slice(0, max - 1).join('')}…` : safe;
}

/** A holder's value for a line of text: quoted, or `(no value)` for etcdctl's empty one. */
export function quotedValue(value: string, max = 40): string {
  return value === '' ? '(no value)' : `"${printable(value, max)}"`;
}

/** Left-aligned columns separated by two spaces; the last column is not padded. */
export function table(rows: readonly (readonly string[])[]): string[] {
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, [...cell].length)));
  }
  return rows.map((row) =>
    row
      .map((cell, i) =>
        i === row.length - 1 ? cell : cell + ' '.repeat(widths[i]! - [...cell].length),
      )
      .join('  ')
      .trimEnd(),
  );
}

/** JSON with bigints as decimal strings (tokens are canonical decimal strings on the wire). */
export function toJson(value: unknown): string {
  return JSON.stringify(value, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
}
