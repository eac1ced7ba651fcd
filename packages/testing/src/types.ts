/** Where an etcd for tests comes from. */
export type EtcdProviderName = 'external' | 'container' | 'binary';

/**
 * What a test asks for: a provider, or a rule that picks one.
 * - `'auto'`: ETCD_ENDPOINTS → 'external', else 'container' if usable, else 'binary'.
 * - `'local'`: a cluster of the test's own even when ETCD_ENDPOINTS is set: 'container' if usable,
 *   else 'binary', never 'external'. For tests that stop, pause, kill, restore or need a
 *   different cluster.
 */
export type EtcdProviderChoice = EtcdProviderName | 'auto' | 'local';

/** Options for {@link startEtcd}. Every default is documented here and applied in `options.ts`. */
export interface StartEtcdOptions {
  /** Cluster size. Default 1. */
  members?: 1 | 3;
  /**
   * Default: env `LEASEHOLD_ETCD_PROVIDER`, else `'auto'`. 'container' is usable when a container
   * engine answers `/_ping` and the optional peer `testcontainers` can be imported.
   */
  provider?: EtcdProviderChoice;
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
  /**
   * Saves a snapshot of this member's keyspace (what `etcdctl snapshot save` saves) to a new file
   * on the host and resolves with its path. The file is removed by the cluster's `close`.
   * The member must be running and not paused.
   */
  snapshot(): Promise<string>;
}

/** A running etcd for tests. Dispose it (or call `close`) to remove everything it started. */
export interface EtcdCluster extends AsyncDisposable {
  readonly provider: EtcdProviderName;
  /** Client URLs, one per member. */
  readonly endpoints: string[];
  /** Controllable members; empty for `'external'`, which the harness does not own. */
  readonly members: EtcdMember[];
  /**
   * etcd's disaster recovery: stops every member, replaces each member's data with
   * `etcdctl snapshot restore` of `snapshotPath` using the member's original `--name`,
   * `--initial-cluster`, `--initial-advertise-peer-urls` and `--initial-cluster-token`, starts
   * all members and waits until they are healthy. The cluster ID and the client URLs stay the
   * same; the revision drops back to the snapshot's. Rejects for 'external'.
   */
  restore(snapshotPath: string): Promise<void>;
  /** Idempotent; removes containers/processes, volumes, snapshots and temporary directories. */
  close(): Promise<void>;
}
