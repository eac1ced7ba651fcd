// pnpm bench: leasehold side by side with raw etcd and its peers, each compared operation
// interleaved with its baseline round by round in one run against an etcd of the bench's own.
// Ratios, not absolute times, are the claim. See bench/README.md.
//
//   pnpm bench [--quick] [--only <substring>] [--json <file>] [--members 1|3] [--provider local]
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { startEtcd } from '@leasehold/testing';
import { printTable } from './lib/table.mjs';
import { now } from './lib/stats.mjs';
import * as uncontended from './scenarios/uncontended.mjs';
import * as handoff from './scenarios/handoff.mjs';
import * as permitHandoff from './scenarios/permit-handoff.mjs';
import * as contended from './scenarios/contended.mjs';
import * as idleQueue from './scenarios/idle-queue.mjs';
import * as manyLocks from './scenarios/many-locks.mjs';
import * as fence from './scenarios/fence.mjs';
import * as election from './scenarios/election.mjs';
import * as partition from './scenarios/partition.mjs';
import * as rpcs from './scenarios/rpcs.mjs';
import * as cron from './scenarios/cron.mjs';

const scenarios = [
  uncontended,
  rpcs,
  handoff,
  permitHandoff,
  contended,
  idleQueue,
  manyLocks,
  fence,
  election,
  partition,
  cron,
];

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    only: { type: 'string', multiple: true },
    json: { type: 'string' },
    members: { type: 'string', default: '1' },
    provider: { type: 'string', default: 'local' },
    locks: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  console.log(
    'usage: pnpm bench [--quick] [--only <substring>]... [--json <file>] [--members 1|3] [--provider local|binary|container] [--locks N (many-locks: locks held by leasehold, e.g. 100000)]\n' +
      `scenarios: ${scenarios.map((s) => s.id).join(', ')}`,
  );
  process.exit(0);
}
const locks = args.locks === undefined ? undefined : Number(args.locks);
if (locks !== undefined && !(Number.isInteger(locks) && locks >= 1 && locks <= 1_000_000)) {
  console.error(`--locks must be an integer from 1 to 1000000, got ${args.locks}`);
  process.exit(2);
}
const members = Number(args.members);
if (members !== 1 && members !== 3) {
  console.error(`--members must be 1 or 3, got ${args.members}`);
  process.exit(2);
}
const selected = scenarios.filter(
  (s) => !args.only || args.only.some((o) => s.id.includes(o) || s.title.includes(o)),
);
if (selected.length === 0) {
  console.error(`--only matched no scenario; scenarios: ${scenarios.map((s) => s.id).join(', ')}`);
  process.exit(2);
}

const started = now();
const log = (line) => console.error(`[${((now() - started) / 1000).toFixed(1)}s] ${line}`);
const etcd = await startEtcd({ members, provider: args.provider });
log(`etcd ${etcd.provider}, ${members} member(s): ${etcd.endpoints.join(', ')}`);
const ctx = {
  endpoints: etcd.endpoints,
  cluster: etcd,
  quick: args.quick,
  log,
  /** The full run's value, or the quick run's. */
  scale: (full, quick) => (args.quick ? quick : full),
  /** `--locks`: how many locks many-locks holds with leasehold (default: its own). */
  locks,
  /** A key prefix no other scenario or run uses. */
  prefix: (name) => `/bench/${name}-${Math.random().toString(36).slice(2, 8)}/`,
};

const rows = [];
let crashed = false;
try {
  for (const scenario of selected) {
    const t0 = now();
    log(`${scenario.id}: ${scenario.title}`);
    try {
      rows.push(...(await scenario.run(ctx)));
    } catch (err) {
      crashed = true;
      console.error(err);
      rows.push({
        scenario: scenario.id,
        name: scenario.title,
        error: String(err?.message ?? err),
      });
    }
    log(`${scenario.id}: done in ${((now() - t0) / 1000).toFixed(1)} s`);
  }
} finally {
  await etcd.close();
}

console.log(
  `\nleasehold bench${args.quick ? ' (quick)' : ''}: etcd ${etcd.provider}, ${members} member(s), node ${process.version}, ${((now() - started) / 1000).toFixed(0)} s; times in ms\n`,
);
printTable(rows);
if (args.json) {
  const meta = { quick: args.quick, members, provider: etcd.provider, node: process.version };
  writeFileSync(args.json, `${JSON.stringify({ ...meta, rows }, null, 2)}\n`);
  console.log(`\nwrote ${args.json}`);
}
// Targets are reported, not asserted: only a scenario that crashed fails the run.
process.exit(crashed ? 1 : 0);
