/** Where an etcd for tests comes from. */
export type EtcdProviderName = 'external' | 'container' | 'binary';

/** Options for {@link startEtcd}. Every default is documented here and applied in `options.ts`. */
export interface StartEtcdOptions {
  /** Cluster size. Default 1. */
  members?: 1 | 3;
  /** Default: env `LEASEHOLD_ETCD_PROVIDER`, else `'auto'`. */
  provider?: EtcdProviderName | 'auto';
  /** Container image. Default: env `LEASEHOLD_ETCD_IMAGE`, else `quay.io/coreos/etcd:v3.4.23`. */
  image?: string;
  /** etcd executable. Default: env `ETCD_BIN`, else `etcd` on `PATH`. */
  binary?: string;
  /** Deadline for the whole cluster to become ready. Default 30 000 ms. */
  startupTimeoutMs?: number;
  /** Aborting stops the start and removes whatever was already started. */
  signal?: AbortSignal;
  /** Receives etcd's log lines and harness progress. Default: no logging. */
  log?: (line: string) => void;
}

/** One etcd member whose process or container the harness controls. */
export interface EtcdMember {
  readonly name: string;
  /** `http://127.0.0.1:PORT`; stays the same across stop/start/restart. */
  readonly clientUrl: string;
  /** Graceful stop (SIGTERM / container stop); the data directory is kept. */
  stop(): Promise<void>;
  /** Start again after stop/kill; resolves once the member reports healthy. */
  start(): Promise<void>;
  /** Freeze the member (SIGSTOP / container pause): connections stay open but nothing answers. */
  pause(): Promise<void>;
  /** Undo {@link pause} (SIGCONT / container unpause). */
  resume(): Promise<void>;
  /** SIGKILL; the data directory is kept. */
  kill(): Promise<void>;
  /** stop + start. */
  restart(): Promise<void>;
}

/** A running etcd for tests. Dispose it (or call `close`) to remove everything it started. */
export interface EtcdCluster extends AsyncDisposable {
  readonly provider: EtcdProviderName;
  /** Client URLs, one per member. */
  readonly endpoints: string[];
  /** Controllable members; empty for `'external'`, which the harness does not own. */
  readonly members: EtcdMember[];
  /** Idempotent; removes containers/processes and temporary data directories. */
  close(): Promise<void>;
}
