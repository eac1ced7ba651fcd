/**
 * Scheduled jobs that run once per fire across all replicas, on etcd. Every replica schedules
 * the same job; for each fire exactly one wins a claim (one etcd transaction) and runs it with the
 * claim's fencing token. Start with {@link createScheduler}; for node-cron 4 tasks, see
 * {@link leaseholdRunCoordinator}.
 *
 * @example
 * ```ts
 * import { connect } from '@leasehold/core';
 * import { createScheduler } from '@leasehold/cron';
 *
 * const client = await connect({ endpoints: ['http://127.0.0.1:2379'] });
 * const scheduler = await createScheduler(client);
 * scheduler.schedule('reports/daily', '30 6 * * *', async ({ token, signal, fireTime }) => {
 *   // send `token` with every write; stop when `signal` aborts
 * });
 * ```
 *
 * @module @leasehold/cron
 */
export { createScheduler, Scheduler, type RunContext, type JobRun } from './scheduler.js';
export {
  leaseholdRunCoordinator,
  type LeaseholdRunCoordinator,
  type RunCoordinator,
  type RunCoordinatorOptions,
  type CoordinatedClaim,
  type TaskContext,
  type TrackedTask,
} from './coordinator.js';
export type { Attempt, ScheduleSpec } from './fires.js';
export type { HistoryEntry, Holder, RunOutcome } from './claims.js';
export type {
  ClaimedEvent,
  ErrorEvent,
  FinishedEvent,
  FireEvent,
  LostEvent,
  SkipReason,
  SkippedEvent,
  StartedEvent,
} from './events.js';
export {
  defaults,
  type JobOptions,
  type MisfirePolicy,
  type OverlapPolicy,
  type SchedulerOptions,
} from './options.js';
export * from './errors.js';
export { inspectJobs, type InspectJobsOptions, type JobReport } from './inspect.js';
