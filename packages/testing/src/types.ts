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
  /**
   * Serve clients over TLS: `endpoints` become `https://127.0.0.1:PORT`. Needs a cluster of the
   * test's own: `'auto'` then picks like `'local'`, and `'external'` is refused. Default: none.
   */
  tls?: EtcdTlsOptions;
  /**
   * Turn on etcd's authentication once the cluster is up: user `root` (role `root`) is created
   * with `rootPassword`, then `auth enable` runs. Add users and roles as root. Needs a cluster of
   * the test's own, like `tls`. Default: none (no authentication).
   */
  auth?: EtcdAuthOptions;
}

/**
 * PEM files on this machine (a container member gets copies). The harness never reads the
 * private key; it talks to each member over a plaintext loopback port of its own, so it needs no
 * certificate either.
 */
export interface EtcdTlsOptions {
  /** The server certificate; its subject alternative names must include 127.0.0.1. */
  certFile: string;
  keyFile: string;
  /**
   * Require a client certificate signed by this CA (etcd's `--client-cert-auth` and
   * `--trusted-ca-file`: mutual TLS). Default: none, any client may connect.
   */
  clientCaFile?: string;
}

export interface EtcdAuthOptions {
  rootPassword: string;
  /**
   * etcd's `--auth-token-ttl`: a simple token unused this long expires, and clients must
   * authenticate again. Default: etcd's own (300 s).
   */
  tokenTtlSeconds?: number;
}

/** Options for {@link EtcdCluster.restore}. */
export interface RestoreOptions {
  /**
   * Restore under this `--initial-cluster-token` instead of the one the cluster was started
   * with: etcd derives new member IDs and a new cluster ID from it, so the rebuilt cluster is
   * another cluster to its clients, at the same client URLs (as after a rebuild with new
   * settings). 1 to 64 letters, digits, `.`, `_` or `-`. Default: the cluster's own token (the
   * cluster ID stays the same).
   */
  clusterToken?: string;
}

/** One etcd member whose process or container the harness controls. */
export interface EtcdMember {
  /** The member's etcd name: `etcd1`, `etcd2`, `etcd3`. */
  readonly name: string;
  /** `http(s)://127.0.0.1:PORT`; stays the same across stop/start/restart. */
  readonly clientUrl: string;
  /** Graceful stop (SIGTERM / container stop); the data directory is kept. */
  stop(): Promise<void>;
  /** Start again after stop/kill; resolves once the member reports healthy. */
  start(): Promise<void>;
  /**
   * Freeze the member (SIGSTOP / container pause): connections stay open but nothing answers.
   * Resolves once it is frozen (every thread stopped), not when the signal is sent.
   */
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
  /** The provider that started it (or, for `'external'`, found it). */
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
   * same (unless `options.clusterToken` gives the rebuilt cluster a new ID); the revision drops
   * back to the snapshot's. Rejects for 'external'.
   */
  restore(snapshotPath: string, options?: RestoreOptions): Promise<void>;
  /** Idempotent; removes containers/processes, volumes, snapshots and temporary directories. */
  close(): Promise<void>;
}
