/** Ports and paths of one member; chosen by the harness so nothing depends on 2379/2380. */
export interface MemberSpec {
  name: string;
  clientPort: number;
  peerPort: number;
  dataDir: string;
  /**
   * Set on a member with TLS: its client URL is https, and it also listens on this plaintext
   * loopback port, which only the harness uses (health checks, snapshots, auth set-up) so that
   * it needs no certificate of its own.
   */
  controlPort?: number;
}

/** etcd's security flags, with file paths as etcd sees them (inside a container, if any). */
export interface EtcdSecurity {
  tls?: { certFile: string; keyFile: string; clientCaFile?: string | undefined } | undefined;
  auth?: { tokenTtlSeconds?: number | undefined } | undefined;
}

export const HEARTBEAT_INTERVAL_MS = 100;
export const ELECTION_TIMEOUT_MS = 1000;

export function clientUrlOf(member: Pick<MemberSpec, 'clientPort' | 'controlPort'>): string {
  const scheme = member.controlPort === undefined ? 'http' : 'https';
  return `${scheme}://127.0.0.1:${member.clientPort}`;
}

/** The plaintext URL the harness itself uses: the control port if any, else the client URL. */
export function controlUrlOf(member: Pick<MemberSpec, 'clientPort' | 'controlPort'>): string {
  return `http://127.0.0.1:${member.controlPort ?? member.clientPort}`;
}

export function peerUrlOf(member: Pick<MemberSpec, 'peerPort'>): string {
  return `http://127.0.0.1:${member.peerPort}`;
}

/**
 * etcd flags for `member` in a cluster of `all`. Everything listens on loopback only (other
 * processes on the machine may use the same ports on other interfaces, and tests must not be
 * reachable from outside). Heartbeat and election timeout are etcd's defaults, spelled out
 * because lease-TTL facts in the design (2 s minimum TTL) depend on them. The same flags are
 * used for a restart: etcd ignores the `--initial-*` flags once its data dir holds a WAL.
 */
export function buildEtcdArgs(
  member: MemberSpec,
  all: MemberSpec[],
  clusterToken: string,
  security: EtcdSecurity = {},
): string[] {
  const listen =
    member.controlPort === undefined
      ? clientUrlOf(member)
      : `${clientUrlOf(member)},${controlUrlOf(member)}`;
  return [
    '--name',
    member.name,
    '--data-dir',
    member.dataDir,
    '--listen-client-urls',
    listen,
    '--advertise-client-urls',
    clientUrlOf(member),
    '--listen-peer-urls',
    peerUrlOf(member),
    '--initial-advertise-peer-urls',
    peerUrlOf(member),
    '--initial-cluster',
    initialClusterOf(all),
    '--initial-cluster-state',
    'new',
    '--initial-cluster-token',
    clusterToken,
    '--heartbeat-interval',
    String(HEARTBEAT_INTERVAL_MS),
    '--election-timeout',
    String(ELECTION_TIMEOUT_MS),
    ...securityArgs(security),
  ];
}

function securityArgs({ tls, auth }: EtcdSecurity): string[] {
  const args: string[] = [];
  if (tls) args.push('--cert-file', tls.certFile, '--key-file', tls.keyFile);
  // A boolean flag takes no separate value in Go's flag syntax.
  if (tls?.clientCaFile)
    args.push('--client-cert-auth=true', '--trusted-ca-file', tls.clientCaFile);
  // Simple tokens (etcd's default) expire after this long unused; tests shorten it.
  if (auth?.tokenTtlSeconds !== undefined) {
    args.push('--auth-token', 'simple', '--auth-token-ttl', String(auth.tokenTtlSeconds));
  }
  return args;
}

/**
 * `etcdctl snapshot restore` arguments that rebuild `member`'s data dir in `dataDir` with the
 * member's original name, peer URL, initial cluster and token. With those unchanged, etcd derives
 * the same member and cluster IDs, so the restored cluster is the same cluster, back at the
 * snapshot's revision.
 */
export function buildRestoreArgs(
  snapshotPath: string,
  member: MemberSpec,
  all: MemberSpec[],
  clusterToken: string,
  dataDir: string,
): string[] {
  return [
    'snapshot',
    'restore',
    snapshotPath,
    '--name',
    member.name,
    '--data-dir',
    dataDir,
    '--initial-cluster',
    initialClusterOf(all),
    '--initial-cluster-token',
    clusterToken,
    '--initial-advertise-peer-urls',
    peerUrlOf(member),
  ];
}

function initialClusterOf(all: MemberSpec[]): string {
  return all.map((m) => `${m.name}=${peerUrlOf(m)}`).join(',');
}

/** Member names: `etcd1`, `etcd2`, ... */
export function memberName(index: number): string {
  return `etcd${index + 1}`;
}
