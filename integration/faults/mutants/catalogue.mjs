// The planted bugs of the mutation self-test (`pnpm faults --mutants`): each is one edit of the
// SDK's source (or the fence's) that breaks one promise, with the short runs (see runs.ts) that
// reach the state where it shows. An edit names text that must occur exactly once, so a change
// of the code it plants into fails the self-test loudly instead of testing nothing.

/** @type {{ id: string, bug: string, file: string, edits: [string, string][], runs: string[] }[]} */
export const MUTANTS = [
  {
    id: 'signal-never',
    bug: "a lock's / leadership's loss signal never fires",
    file: 'packages/core/src/queue.ts',
    // The entry still ends inside the queue; its hold, signal, reads and onLost never learn.
    edits: [['this.#end.trip(this.lostError(reason, this, cause));', 'void [reason, cause];']],
    runs: ['lock-partition', 'lock-pause'],
  },
  {
    id: 'signal-late-2s',
    bug: 'the loss signal fires 2 s late',
    file: 'packages/core/src/queue.ts',
    edits: [
      [
        'this.#end.trip(this.lostError(reason, this, cause));',
        'setTimeout(() => this.#end.trip(this.lostError(reason, this, cause)), 2_000);',
      ],
    ],
    runs: ['lock-partition', 'lock-revoke'],
  },
  {
    id: 'session-no-deadline',
    bug: 'the session ignores keepalive failures and its local deadline',
    file: 'packages/core/src/session.ts',
    edits: [['if (this.#latch.reason || this.clock.now() < this.#expiresAt) return;', 'return;']],
    runs: ['lock-partition'],
  },
  {
    id: 'cron-no-compare',
    bug: 'a cron claim with no compare at all',
    file: 'packages/cron/src/claims.ts',
    edits: [
      ['compare: [absent(recordKey)],', 'compare: [],'],
      ['compare: [absent(recordKey), absent(keys.running)],', 'compare: [],'],
    ],
    runs: ['cron'],
  },
  {
    id: 'lead-early',
    bug: '`lead()` starts work before its key is first',
    file: 'packages/core/src/election.ts',
    edits: [
      [
        '    joined(entry);\n    await entry.waitFirst(signal);',
        '    joined(entry);\n    void entry.waitFirst(signal).catch(() => undefined);',
      ],
    ],
    runs: ['election'],
  },
  {
    id: 'fence-le',
    bug: "the fence refuses a current holder's own second write (`<=` for `<`)",
    file: 'packages/fence/src/memory.ts',
    edits: [['token < entry.highestToken', 'token <= entry.highestToken']],
    runs: ['lock-quiet'],
  },
  {
    id: 'release-unguarded',
    bug: 'release deletes without the create-revision guard',
    file: 'packages/core/src/queue.ts',
    edits: [['        compare: [guard],', '        compare: [],']],
    runs: ['slow-links'],
  },
  {
    id: 'token-mod-revision',
    bug: 'keys (and adopted tokens) judged by their mod revision',
    file: 'packages/core/src/queue.ts',
    edits: [
      [
        'const revisionOf = (kv: { create_revision: string }) => BigInt(kv.create_revision);',
        'const revisionOf = (kv: { create_revision: string; mod_revision?: string }) =>\n  BigInt(kv.mod_revision ?? kv.create_revision);',
      ],
    ],
    runs: ['election'],
  },
  // Planted so that every property is shown able to fail, beyond the audit's list.
  {
    id: 'cron-no-tolerance',
    bug: 'cron ignores lateToleranceMs: a timer a few ms late misses its fire',
    file: 'packages/cron/src/fires.ts',
    edits: [
      ['due.filter((t) => nowMs - t <= lateToleranceMs)', 'due.filter((t) => nowMs - t <= 0)'],
    ],
    runs: ['cron'],
  },
  {
    id: 'watch-delete-ignored',
    bug: "a hold ignores its key's deletion on the watch (it learns at the next re-read or keepalive)",
    file: 'packages/core/src/queue.ts',
    edits: [
      [
        "if (kind === 'delete') return this.#lose(this.#gone());",
        "if (kind === 'delete') continue;",
      ],
    ],
    runs: ['lock-revoke'],
  },
  {
    id: 'fence-ack-unwritten',
    bug: 'the memory fence acknowledges a write it never applied',
    file: 'packages/fence/src/memory.ts',
    edits: [['  const result = apply();', '  const result = undefined as T;']],
    runs: ['lock-quiet'],
  },
  {
    id: 'lease-ttl-tripled',
    bug: 'the session asks etcd for three times the TTL it was given',
    file: 'packages/core/src/session.ts',
    edits: [
      [
        'leaseGrant({ TTL: ttlSeconds, ID: 0 }, o)',
        'leaseGrant({ TTL: ttlSeconds * 3, ID: 0 }, o)',
      ],
    ],
    runs: ['lock-kill'],
  },
];

/** Runs that show S1, S2 and S4 able to fail: no SDK edit, the workloads' fencing off. */
export const CONTROLS = [
  {
    id: 'unfenced',
    bug: 'writes sent without fencing (negative control)',
    runs: ['unfenced-pause'],
  },
];
