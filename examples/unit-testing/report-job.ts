// A leader-only job: of all replicas, only the one that leads "nightly-report" builds the
// report, and it writes it through a fenced store, so a leader that lost its term while building
// (a long pause, say) cannot overwrite the report of the leader after it.
import type { Leasehold } from '@leasehold/core';
import type { FencedStore } from '@leasehold/fence';

export interface ReportJob {
  client: Leasehold;
  store: FencedStore;
  /** Who this replica is, shown as the leader's value. */
  replica: string;
  /** Builds the report (the slow part). */
  build: () => Promise<string>;
}

/**
 * Leads once: builds and writes the report as leader, then resigns. Resolves with the token it
 * wrote under; rejects if the store refused the write (`StaleTokenError`: the term was lost while
 * building and a newer leader wrote), or if it never led.
 */
export async function runReportJob(job: ReportJob): Promise<bigint> {
  let work: Promise<bigint> | undefined;
  const buildAndWrite = async (token: bigint) => {
    const report = await job.build();
    await job.store.write({ resource: 'nightly-report', token, value: report });
    return token;
  };
  const led = job.client.lead(
    'nightly-report',
    job.replica,
    ({ token }) => (work = buildAndWrite(token)),
    {
      recampaign: false,
    },
  );
  try {
    await led;
  } catch (err) {
    if (!work) throw err;
    // The term was lost while the work ran: what its write did is the outcome.
  }
  return work!;
}
