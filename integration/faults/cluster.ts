/**
 * Cluster control for fault runs: an etcd of the run's own (1 or 3 local members, heartbeat
 * 100 ms, election timeout 1000 ms) with the operations the nemesis needs that the testing
 * package does not have itself: find the leader, compact, revoke a lease, delete a key, and raise
 * the revision after a snapshot restore (etcd 3.4 has no `--bump-revision`). etcdctl does the
 * admin work, as an operator would.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startEtcd, type EtcdCluster, type EtcdMember } from '@leasehold/testing';
import { status as memberStatus } from '../setup/members.js';

const run = promisify(execFile);

/** etcd's timing for the run; the checker's liveness bounds come from it. */
export const ELECTION_TIMEOUT_MS = 1000;

const ETCDCTL_TIMEOUT_MS = 5_000;

interface EndpointStatus {
  Endpoint: string;
  Status: { header: { revision: number } };
}

export class FaultCluster implements AsyncDisposable {
  private constructor(readonly etcd: EtcdCluster) {}

  static async start(members: 1 | 3): Promise<FaultCluster> {
    // Binary members: SIGSTOP, SIGKILL and restarts take milliseconds, not container round trips.
    return new FaultCluster(await startEtcd({ members, provider: 'binary' }));
  }

  get endpoints(): string[] {
    return this.etcd.endpoints;
  }

  get members(): EtcdMember[] {
    return this.etcd.members;
  }

  /** The member that leads now, or undefined when no running member knows one. */
  async leader(): Promise<EtcdMember | undefined> {
    const all = await Promise.all(this.members.map((m) => memberStatus(m.clientUrl)));
    const leaderId = all.find((s) => s !== undefined)?.leader;
    const index = all.findIndex((s) => s?.member === leaderId);
    return index >= 0 ? this.members[index] : undefined;
  }

  /** A running member that does not lead (with one member: that member). */
  async follower(random: () => number): Promise<EtcdMember> {
    const leader = await this.leader();
    const others = this.members.filter((m) => m !== leader);
    return others.length === 0 ? this.members[0]! : others[Math.floor(random() * others.length)]!;
  }

  /** The cluster's current revision. */
  async revision(): Promise<number> {
    const statuses = await this.status();
    return Math.max(...statuses.map((s) => Number(s.Status.header.revision)));
  }

  /** Compacts the keyspace up to the current revision: every watch behind it is cancelled. */
  async compact(): Promise<number> {
    const revision = await this.revision();
    await this.etcdctl(['compact', String(revision)]);
    return revision;
  }

  /** Revokes a lease (hex id, as the workers log it): every key on it goes. */
  async revokeLease(leaseIdHex: string): Promise<void> {
    await this.etcdctl(['lease', 'revoke', leaseIdHex]);
  }

  async deleteKey(key: string): Promise<void> {
    await this.etcdctl(['del', key]);
  }

  /** Writes a scratch key until the revision passes `above`: recovery after a restore. */
  async bumpRevision(above: number): Promise<number> {
    const { Etcd3 } = await import('etcd3');
    const client = new Etcd3({ hosts: this.endpoints });
    try {
      let revision = await this.revision();
      while (revision <= above) {
        const batch = Math.min(50, above - revision + 1);
        await Promise.all(
          Array.from({ length: batch }, (_, i) => client.put(`/faults/bump/${i}`).value('x')),
        );
        revision = await this.revision();
      }
      return revision;
    } finally {
      client.close();
    }
  }

  private async status(): Promise<EndpointStatus[]> {
    const out: EndpointStatus[] = [];
    // One endpoint at a time: a paused or stopped member must not hide the others' answers.
    await Promise.all(
      this.endpoints.map(async (endpoint) => {
        try {
          const { stdout } = await run(
            'etcdctl',
            ['--endpoints', endpoint, '--command-timeout=1s', 'endpoint', 'status', '-w', 'json'],
            { env: etcdctlEnv(), timeout: 3_000 },
          );
          out.push(...(JSON.parse(stdout) as EndpointStatus[]));
        } catch {
          // not answering now
        }
      }),
    );
    return out;
  }

  private async etcdctl(args: string[]): Promise<string> {
    const { stdout } = await run(
      'etcdctl',
      ['--endpoints', this.endpoints.join(','), '--command-timeout=3s', ...args],
      { env: etcdctlEnv(), timeout: ETCDCTL_TIMEOUT_MS },
    );
    return stdout;
  }

  close(): Promise<void> {
    return this.etcd.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

function etcdctlEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !k.startsWith('ETCD_') && !k.startsWith('ETCDCTL_'),
    ),
  );
  return { ...env, ETCDCTL_API: '3' };
}
