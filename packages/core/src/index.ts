export { Leasehold } from './client.js';
export { connect, type ConnectOptions } from './connect.js';
export { Session, type SessionOptions } from './session.js';
export { Lock, type AcquireOptions, type TryAcquireOptions, type LockContext } from './mutex.js';
export { type LockGuard, type FencedOp, type Holder } from './hold.js';
export {
  Permit,
  MAX_PERMITS,
  type PermitOptions,
  type TryPermitOptions,
  type PermitContext,
  type PermitHolder,
  type SemaphoreState,
} from './semaphore.js';
export { Leadership, type CampaignOptions } from './election.js';
export { type LeaderState, type ObserveOptions } from './observe.js';
export { type LeadOptions, type LeaderContext, type LeaderWork } from './lead.js';
export {
  defaults,
  MIN_TTL_SECONDS,
  MAX_TTL_SECONDS,
  MAX_NAME_LENGTH,
  MAX_VALUE_BYTES,
  type AuthOptions,
  type TlsOptions,
} from './options.js';
export { type Logger, type LogFn } from './logger.js';
export { type TelemetryOptions } from './telemetry.js';
export { type StallEvent } from './stall.js';
export * from './errors.js';
