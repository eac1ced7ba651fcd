/**
 * A fault run's own etcd (1 or 3 local members, heartbeat 100 ms, election timeout 1000 ms) and
 * what the nemesis does to it: find the leader, pause, kill and restart members, cut members off
 * from each other (peers.ts), replace a member or wipe one and add it back (membership changes),
 * compact, revoke a lease or delete a key (timed, for the checker's deletion bound), snapshot and
 * restore, and raise the revision after a restore (etcd 3.4 has no `--bump-revision`). etcdctl
 * does the membership work, as an operator would.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { freePort } from '@leasehold/testing';
import type { Etcd3 } from 'etcd3';
import { status as memberStatus } from '../setup/members.js';
import { etcdFreeEnv, FaultMember } from './member.js';
import { PeerNetwork } from './peers.js';

export { ELECTION_TIMEOUT_MS } from './member.js';

const run = promisify(execFile);
const ETCDCTL_TIMEOUT_MS = 8_000;
const MEMBERSHIP_MS = 30_000;

/** When a deletion was sent and acknowledged: the deletion happened in between. */
export interface Timed {
  sentAt: number;
  ackAt: number;
}

const now = () => performance.timeOrigin + performance.now();

/** `etcdctl member list` rows, split into columns. */
const rows = (list: string): string[][] =>
  list
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => l.split(',').map((c) => c.trim()));

export class FaultCluster implements AsyncDisposable {
  #admin: Etcd3 | undefined;
  #replaced = 0;

  private constructor(
    readonly members: FaultMember[],
    readonly peers: PeerNetwork,
    private readonly root: string,
    private readonly token: string,
  ) {}

  static async start(size: 1 | 3): Promise<FaultCluster> {
    const root = await mkdtemp(join(tmpdir(), 'leasehold-faults-etcd-'));
    const members: FaultMember[] = [];
    for (let i = 1; i <= size; i++) {
      const ports = {
        client: await freePort(),
        peer: await freePort(),
        advertised: await freePort(),
      };
      members.push(new FaultMember(`m${i}`, `m${i}`, ports, join(root, `m${i}`)));
    }
    const peers = await PeerNetwork.start(
      members.map((m) => ({
        name: m.slot,
        advertisedPort: m.ports.advertised,
        listenPort: m.ports.peer,
      })),
      (slot) => members.find((m) => m.slot === slot)?.pid,
    );
    const cluster = new FaultCluster(members, peers, root, `faults-${process.pid}-${Date.now()}`);
    process.once('exit', () => cluster.#killAll());
    await Promise.all(members.map((m) => m.start(cluster.#initial('new'))));
    // Connected now, so a deletion fault's measured round trip is one round trip, not a dial.
    await (await cluster.#client()).get('/faults/warm-up').string();
    return cluster;
  }

  get endpoints(): string[] {
    return this.members.map((m) => m.clientUrl);
  }

  #initial(state: 'new' | 'existing', cluster = this.#initialCluster()) {
    return { cluster, state, token: this.token };
  }

  #initialCluster(): string {
    return this.members.map((m) => `${m.name}=${m.peerUrl}`).join(',');
  }

  /**
   * The member that leads now, as most members see it (a member cut off from the others may
   * still name itself), or undefined when no running member knows one.
   */
  async leader(): Promise<FaultMember | undefined> {
    const all = await Promise.all(this.members.map((m) => memberStatus(m.clientUrl)));
    const votes = new Map<string, number>();
    for (const s of all) if (s) votes.set(s.leader, (votes.get(s.leader) ?? 0) + 1);
    const leaderId = [...votes].sort(([, a], [, b]) => b - a)[0]?.[0];
    const index = all.findIndex((s) => s?.member === leaderId);
    return index >= 0 ? this.members[index] : undefined;
  }

  /**
   * The member every member of `group` names as leader, if it is one of them; undefined while
   * the group has not agreed on a leader of its own (during an election, or without a quorum).
   */
  async leaderOf(group: FaultMember[]): Promise<FaultMember | undefined> {
    const all = await Promise.all(group.map((m) => memberStatus(m.clientUrl)));
    const named = new Set(all.map((s) => s?.leader));
    if (named.size !== 1 || named.has(undefined)) return undefined;
    const index = all.findIndex((s) => s?.member === all[0]!.leader);
    return index >= 0 ? group[index] : undefined;
  }

  /** What each member names as leader (its slot, '?' if unknown to us, '-' if none or no answer). */
  async named(): Promise<Record<string, string>> {
    const all = await Promise.all(this.members.map((m) => memberStatus(m.clientUrl)));
    const slotOf = (id: string) =>
      this.members[all.findIndex((s) => s?.member === id)]?.slot ?? '?';
    return Object.fromEntries(
      this.members.map((m, i) => [m.slot, all[i] ? slotOf(all[i].leader) : '-']),
    );
  }

  /** A running member that does not lead (with one member: that member). */
  async follower(random: () => number): Promise<FaultMember> {
    const leader = await this.leader();
    const others = this.members.filter((m) => m !== leader && m.running);
    return others.length === 0 ? this.members[0]! : others[Math.floor(random() * others.length)]!;
  }

  /** Every member healthy (sees a leader). */
  async healthy(): Promise<boolean> {
    return (await Promise.all(this.members.map((m) => m.healthy()))).every(Boolean);
  }

  /** Starts a member that was killed or stopped, with its data. */
  async startMember(member: FaultMember): Promise<void> {
    await member.start(this.#initial('new'));
  }

  async restartAll(): Promise<void> {
    await Promise.all(this.members.map((m) => m.stop()));
    await Promise.all(this.members.map((m) => m.start(this.#initial('new'))));
  }

  /** Cuts every member of one group off from every member of the others (clients still reach all). */
  partition(groups: FaultMember[][]): void {
    this.peers.partition(groups.map((g) => g.map((m) => m.slot)));
  }

  heal(): void {
    this.peers.heal();
  }

  /**
   * A membership change: `member` is removed from the cluster (it stops itself), its data is
   * wiped, and a new member with a new name and id joins on the same ports.
   */
  async replace(member: FaultMember): Promise<string> {
    const old = member.name;
    await this.#remove(member);
    await member.stop();
    await member.wipe();
    member.name = `${member.slot}r${++this.#replaced}`;
    await this.#add(member);
    return `${old} → ${member.name}`;
  }

  /** `member` killed (SIGKILL), its data directory wiped, removed and added back under its name. */
  async wipe(member: FaultMember): Promise<void> {
    await member.kill();
    await member.wipe();
    await this.#remove(member);
    await this.#add(member);
  }

  async #remove(member: FaultMember): Promise<void> {
    const others = this.#others(member);
    const list = await this.#membership(['member', 'list'], others);
    // `<hex id>, started, <name>, <peer urls>, <client urls>, <is learner>`
    const row = rows(list).find((cols) => cols[2] === member.name || cols[3] === member.peerUrl);
    if (!row) throw new Error(`member ${member.name} is not in the member list:\n${list}`);
    await this.#membership(['member', 'remove', row[0]!], others);
    await this.#seenByAll(others, (cols) => !cols.some((c) => c[0] === row[0]));
  }

  async #add(member: FaultMember): Promise<void> {
    const others = this.#others(member);
    const out = await this.#membership(
      ['member', 'add', member.name, `--peer-urls=${member.peerUrl}`],
      others,
    );
    // A member that learns the membership from a peer still behind would join under the old
    // id (and panic on its empty log): start it once every other member lists the new one.
    await this.#seenByAll(others, (cols) => cols.some((c) => c[3] === member.peerUrl));
    const initial = /ETCD_INITIAL_CLUSTER="([^"]+)"/.exec(out)?.[1] ?? this.#initialCluster();
    await member.start(this.#initial('existing', initial));
  }

  #others(member: FaultMember): string[] {
    return this.members.filter((m) => m !== member).map((m) => m.clientUrl);
  }

  /** Waits until each of `endpoints` (its own, local view) shows a member list that `ok`s. */
  async #seenByAll(endpoints: string[], ok: (rows: string[][]) => boolean): Promise<void> {
    const deadline = performance.now() + MEMBERSHIP_MS;
    for (const endpoint of endpoints) {
      for (;;) {
        const list = await this.#etcdctl(['member', 'list'], [endpoint]).catch(() => undefined);
        if (list !== undefined && ok(rows(list))) break;
        if (performance.now() > deadline) {
          throw new Error(
            `${endpoint} did not see the membership change within ${MEMBERSHIP_MS} ms`,
          );
        }
        await sleep(100);
      }
    }
  }

  /** The cluster's current revision (the highest any member reports). */
  async revision(): Promise<number> {
    const revisions = await Promise.all(
      this.endpoints.map(async (endpoint) => {
        try {
          const res = await fetch(`${endpoint}/v3/maintenance/status`, {
            method: 'POST',
            body: '{}',
            signal: AbortSignal.timeout(1_000),
          });
          const body = (await res.json()) as { header?: { revision?: string } };
          return Number(body.header?.revision ?? 0);
        } catch {
          return 0; // not answering now
        }
      }),
    );
    return Math.max(...revisions);
  }

  /** Compacts the keyspace up to the current revision: every watch behind it is cancelled. */
  async compact(): Promise<number> {
    const revision = await this.revision();
    await this.#etcdctl(['compact', String(revision)]);
    return revision;
  }

  /** Revokes a lease (hex id, as the workers log it): every key on it goes. */
  async revokeLease(leaseIdHex: string): Promise<Timed> {
    const admin = await this.#client();
    const sentAt = now();
    await admin.leaseClient.leaseRevoke({ ID: BigInt(`0x${leaseIdHex}`).toString() });
    return { sentAt, ackAt: now() };
  }

  async deleteKey(key: string): Promise<Timed> {
    const admin = await this.#client();
    const sentAt = now();
    await admin.delete().key(key);
    return { sentAt, ackAt: now() };
  }

  async snapshot(): Promise<string> {
    const file = join(this.root, `snapshot-${Date.now()}.db`);
    const member = this.members.find((m) => m.running) ?? this.members[0]!;
    await this.#etcdctl(['snapshot', 'save', file], [member.clientUrl]);
    return file;
  }

  /** etcd's disaster recovery: every member's data replaced by `file`, same names and URLs. */
  async restore(file: string): Promise<void> {
    await Promise.all(this.members.map((m) => m.stop()));
    const cluster = this.#initialCluster();
    for (const member of this.members) {
      await member.wipe();
      await run(
        'etcdctl',
        [
          'snapshot',
          'restore',
          file,
          '--name',
          member.name,
          '--initial-cluster',
          cluster,
          '--initial-cluster-token',
          this.token,
          '--initial-advertise-peer-urls',
          member.peerUrl,
          '--data-dir',
          member.dataDir,
        ],
        { env: { ...etcdFreeEnv(), ETCDCTL_API: '3' }, timeout: ETCDCTL_TIMEOUT_MS },
      );
    }
    await Promise.all(this.members.map((m) => m.start(this.#initial('new', cluster))));
  }

  /** Writes a scratch key until the revision passes `above`: recovery after a restore. */
  async bumpRevision(above: number): Promise<number> {
    const client = await this.#client();
    let revision = await this.revision();
    while (revision <= above) {
      const batch = Math.min(50, above - revision + 1);
      await Promise.all(
        Array.from({ length: batch }, (_, i) => client.put(`/faults/bump/${i}`).value('x')),
      );
      revision = await this.revision();
    }
    return revision;
  }

  async #client(): Promise<Etcd3> {
    if (!this.#admin) {
      const { Etcd3 } = await import('etcd3');
      this.#admin = new Etcd3({ hosts: this.endpoints });
    }
    return this.#admin;
  }

  /**
   * A membership command, tried again while the cluster cannot take it yet (a member that just
   * joined is still catching up, so the others may lack a quorum of started members for a while).
   */
  async #membership(args: string[], endpoints: string[]): Promise<string> {
    const deadline = performance.now() + MEMBERSHIP_MS;
    for (;;) {
      try {
        return await this.#etcdctl(args, endpoints);
      } catch (err) {
        if (performance.now() > deadline) throw err;
        await sleep(250);
      }
    }
  }

  async #etcdctl(args: string[], endpoints = this.endpoints): Promise<string> {
    const { stdout } = await run(
      'etcdctl',
      ['--endpoints', endpoints.join(','), '--command-timeout=5s', ...args],
      { env: { ...etcdFreeEnv(), ETCDCTL_API: '3' }, timeout: ETCDCTL_TIMEOUT_MS },
    );
    return stdout;
  }

  #killAll(): void {
    for (const m of this.members) {
      try {
        if (m.pid !== undefined) process.kill(m.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }

  async close(): Promise<void> {
    this.#admin?.close();
    await Promise.all(this.members.map((m) => m.kill()));
    await this.peers.close();
    await rm(this.root, { recursive: true, force: true });
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
