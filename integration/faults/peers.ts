/**
 * The network between etcd members, for partitions between them: every member advertises a peer
 * URL that is a proxy of ours in front of its real peer port, so all raft traffic, lease
 * renewals forwarded to the leader and every other member-to-member request pass through here.
 * A connection is attributed to the member that dialled it by the socket's owner (the kernel's
 * table of TCP sockets and each member's file descriptors), so a cut between two members refuses
 * and resets exactly their connections, in both directions, while clients still reach every
 * member; while a cut stands, a connection whose dialler cannot be named is refused too. A
 * partition that heals lets new connections through; etcd redials on its own.
 */
import { readFile, readdir, readlink } from 'node:fs/promises';
import { connect, createServer, type Server, type Socket } from 'node:net';

/** Where a member's peer traffic goes: the port it advertises (ours) and the one it listens on. */
export interface PeerRoute {
  name: string;
  advertisedPort: number;
  listenPort: number;
}

interface Link {
  from: string | undefined;
  client: Socket;
  upstream: Socket;
}

export class PeerNetwork {
  readonly #servers = new Map<string, Server>();
  readonly #links = new Map<string, Set<Link>>();
  /** Unordered pairs `a|b` (a < b) that may not talk. */
  readonly #cut = new Set<string>();

  private constructor(
    /** The member process ids by name, as they are now (members restart). */
    private readonly pidOf: (name: string) => number | undefined,
  ) {}

  static async start(
    routes: PeerRoute[],
    pidOf: (name: string) => number | undefined,
  ): Promise<PeerNetwork> {
    const network = new PeerNetwork(pidOf);
    for (const route of routes) await network.add(route);
    return network;
  }

  /** Starts the proxy in front of a member (again, for a member replaced on the same ports). */
  async add(route: PeerRoute): Promise<void> {
    if (this.#servers.has(route.name)) return;
    const links = new Set<Link>();
    this.#links.set(route.name, links);
    const server = createServer({ pauseOnConnect: true }, (client) => {
      void this.#accept(route, client, links);
    });
    server.on('error', () => {});
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: '127.0.0.1', port: route.advertisedPort }, () => resolve());
    });
    this.#servers.set(route.name, server);
  }

  /** Cuts every pair of members that are in different groups; members in no group keep talking to all. */
  partition(groups: string[][]): void {
    for (const [i, group] of groups.entries()) {
      for (const other of groups.slice(i + 1)) {
        for (const a of group) for (const b of other) this.#cut.add(pair(a, b));
      }
    }
    for (const [to, links] of this.#links) {
      for (const link of links) if (this.#blocked(link.from, to)) reset(link, links);
    }
  }

  /** Every member talks to every other again. */
  heal(): void {
    this.#cut.clear();
  }

  get cutPairs(): string[] {
    return [...this.#cut];
  }

  async close(): Promise<void> {
    for (const [name, server] of this.#servers) {
      for (const link of this.#links.get(name) ?? []) {
        link.client.destroy();
        link.upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    this.#servers.clear();
  }

  /**
   * Whether a connection from `from` to `to` is refused. While a cut stands, so is one whose
   * dialler could not be named (it may be a cut member; on a loaded host /proc can lag): a cut
   * that leaks is no cut, and a refused member just redials.
   */
  #blocked(from: string | undefined, to: string): boolean {
    if (from === undefined) return this.#cut.size > 0;
    return from !== to && this.#cut.has(pair(from, to));
  }

  async #accept(route: PeerRoute, client: Socket, links: Set<Link>): Promise<void> {
    client.on('error', () => {});
    client.setNoDelay(true);
    const from = await this.#dialler(client.remotePort, client.localPort).catch(() => undefined);
    if (client.destroyed) return;
    if (this.#blocked(from, route.name)) {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect({ host: '127.0.0.1', port: route.listenPort });
    upstream.setNoDelay(true);
    upstream.on('error', () => {});
    const link: Link = { from, client, upstream };
    links.add(link);
    const done = () => {
      links.delete(link);
      client.destroy();
      upstream.destroy();
    };
    client.once('close', done);
    upstream.once('close', done);
    client.pipe(upstream);
    upstream.pipe(client);
    client.resume();
  }

  /** The member whose process owns the client end of a connection from `port` to `to`, if any. */
  async #dialler(port: number | undefined, to: number | undefined): Promise<string | undefined> {
    if (port === undefined || to === undefined) return undefined;
    const inode = await socketInode(port, to);
    if (inode === undefined) return undefined;
    for (const name of this.#servers.keys()) {
      const pid = this.pidOf(name);
      if (pid !== undefined && (await ownsSocket(pid, inode))) return name;
    }
    return undefined;
  }
}

const pair = (a: string, b: string): string => (a < b ? `${a}|${b}` : `${b}|${a}`);

function reset(link: Link, links: Set<Link>): void {
  links.delete(link);
  link.client.resetAndDestroy();
  link.upstream.resetAndDestroy();
}

/**
 * The inode of the dialling end of the connection 127.0.0.1:`port` → 127.0.0.1:`to`. Matched on
 * both ends: the local port alone also matches a closed connection of another process that used
 * it before (TIME_WAIT, which has no owner: inode 0), and a busy host has many.
 */
async function socketInode(port: number, to: number): Promise<string | undefined> {
  const table = await readFile('/proc/net/tcp', 'utf8');
  const address = (p: number) => `0100007F:${p.toString(16).toUpperCase().padStart(4, '0')}`;
  const [local, remote] = [address(port), address(to)];
  for (const row of table.split('\n').slice(1)) {
    const cols = row.trim().split(/\s+/);
    if (cols[1] === local && cols[2] === remote && cols[9] !== '0') return cols[9];
  }
  return undefined;
}

async function ownsSocket(pid: number, inode: string): Promise<boolean> {
  const dir = `/proc/${pid}/fd`;
  const want = `socket:[${inode}]`;
  const fds = await readdir(dir).catch(() => [] as string[]);
  for (const fd of fds) {
    if ((await readlink(`${dir}/${fd}`).catch(() => '')) === want) return true;
  }
  return false;
}
