/**
 * The short fault runs the mutation self-test uses, by name: each reaches the state one family
 * of planted bugs breaks (a holder cut off or frozen past its deadline, a key deleted under a
 * holder, two cron replicas on one schedule, a leader that proclaims, slow links to all members but one).
 */
import type { RunOptions } from '../runner.js';

export const RUNS = {
  'lock-partition': { workers: { lock: 3 }, faults: ['partition', 'partition'] },
  'lock-pause': { workers: { lock: 3 }, faults: ['pause-holder', 'stall-loop'] },
  'lock-revoke': { workers: { lock: 3 }, faults: ['revoke-lease', 'delete-key'] },
  'lock-kill': { workers: { lock: 3 }, faults: ['kill-holder', 'kill-holder'] },
  'lock-quiet': { workers: { lock: 2 }, faults: [], durationMs: 8_000 },
  election: { workers: { election: 2 }, faults: [], durationMs: 15_000 },
  'election-partition': { workers: { election: 2 }, faults: ['partition', 'pause-holder'] },
  cron: { workers: { cron: 2 }, faults: ['clock-skew'], durationMs: 12_000 },
  'cron-leader': {
    members: 3,
    ttlSeconds: 4,
    workers: { cron: 2 },
    faults: ['pause-leader', 'pause-leader', 'pause-leader', 'kill-leader'],
  },
  'slow-links': {
    members: 3,
    ttlSeconds: 4,
    workers: { lock: 3 },
    faults: ['slow-links', 'slow-links', 'slow-links', 'slow-links'],
  },
  'unfenced-pause': {
    fenced: false,
    workers: { lock: 2, election: 2 },
    faults: ['pause-holder', 'pause-holder', 'pause-holder'],
  },
} satisfies Record<string, Omit<RunOptions, 'label'>>;

export type RunName = keyof typeof RUNS;
