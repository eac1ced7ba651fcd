const fmt = (x, digits = 2) =>
  typeof x === 'number' && Number.isFinite(x) ? x.toFixed(digits) : '';

/** The one table: a line per row, columns sized to fit. */
export function printTable(rows) {
  const header = ['scenario', 'n', 'p50', 'p90', 'p99', 'ops/s', 'value', 'ratio', 'target', 'met'];
  const lines = rows.map((r) => [
    r.name,
    r.n === undefined ? '' : String(r.n),
    fmt(r.p50),
    fmt(r.p90),
    fmt(r.p99),
    fmt(r.opsPerSec, 0),
    r.value ?? '',
    typeof r.ratio === 'number' ? `${r.ratio.toFixed(2)}×` : '',
    r.target ?? '',
    r.met === true ? 'yes' : r.met === false ? 'NO' : r.error ? 'CRASHED' : '',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const right = new Set([1, 2, 3, 4, 5, 7]);
  const line = (cells) =>
    cells.map((c, i) => (right.has(i) ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  let scenario;
  rows.forEach((r, i) => {
    if (r.scenario !== scenario && i > 0) console.log('');
    scenario = r.scenario;
    console.log(line(lines[i]).trimEnd());
  });
  const notes = rows.filter((r) => r.note || r.error);
  if (notes.length > 0) console.log('\nnotes:');
  for (const r of notes) console.log(`  ${r.name}: ${r.error ? `CRASHED: ${r.error}` : r.note}`);
}
