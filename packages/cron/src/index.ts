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
