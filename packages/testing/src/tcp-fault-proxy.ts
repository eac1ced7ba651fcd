import { createServer, type Server, type Socket } from 'node:net';
import type { FaultMode, FaultPolicy } from './forwarder.js';
import { ProxyConnection, resetSocket, type ProxyTarget } from './proxy-connection.js';
import { unknownKey } from './known-keys.js';

export type { FaultMode } from './forwarder.js';

/** Options of {@link TcpFaultProxy.start}: `target` is required. */
export interface TcpFaultProxyOptions {
  /** `host:port` or `http://host:port`. */
  target: string;
  /** Port on 127.0.0.1; default: a free one. */
  listenPort?: number;
}

const DEFAULT_DELAY_MS = 100;

/**
 * A TCP proxy on 127.0.0.1 that injects whole-connection faults between a client and a server:
 * - 'pass'  forwards bytes as they come;
 * - 'stall' holds all traffic both ways (new connections are accepted but nothing flows) until
 *           the mode changes, then delivers it in order, like a network partition that heals;
 * - 'delay' forwards every chunk `delayMs` after it arrived, in order;
 * - 'reset' sends RST on every open connection and on each new one.
 */
export class TcpFaultProxy implements AsyncDisposable {
  /** `http://127.0.0.1:PORT`: the address to give the client in place of the target's. */
  readonly url: string;
  private readonly connections = new Set<ProxyConnection>();
  private policy: FaultPolicy = { mode: 'pass', delayMs: DEFAULT_DELAY_MS };
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly server: Server,
    /** The port it listens on, on 127.0.0.1. */
    readonly port: number,
    private target: ProxyTarget,
  ) {
    this.url = `http://127.0.0.1:${port}`;
  }

  /**
   * Starts a proxy to `options.target`, listening on 127.0.0.1, in mode `'pass'`.
   *
   * @throws TypeError for options that are not an object, or a `target` that is not `host:port` or
   * `http://host:port`; rejects with the listen error (`EADDRINUSE`) when `listenPort` is taken.
   *
   * @example
   * ```ts
   * await using proxy = await TcpFaultProxy.start({ target: etcd.endpoints[0]! });
   * const client = new Etcd3({ hosts: proxy.url });
   * proxy.setMode('stall'); // calls now hang until their deadline
   * ```
   */
  static async start(options: TcpFaultProxyOptions): Promise<TcpFaultProxy> {
    if (typeof options !== 'object' || options === null || Array.isArray(options)) {
      throw new TypeError(
        `TcpFaultProxy.start options must be an object such as { target: '127.0.0.1:2379' }, got ${JSON.stringify(options) ?? String(options)}`,
      );
    }
    const unknown = unknownKey('TcpFaultProxy.start options', options, [
      'target',
      'listenPort',
    ] satisfies (keyof TcpFaultProxyOptions)[]);
    if (unknown) throw new TypeError(unknown);
    const target = parseTarget(options.target);
    // pauseOnConnect: no byte is read before the connection's forwarders apply the mode.
    const server = createServer({ allowHalfOpen: true, pauseOnConnect: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: '127.0.0.1', port: options.listenPort ?? 0 }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const address = server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    const proxy = new TcpFaultProxy(server, port, target);
    server.on('connection', (socket) => proxy.accept(socket));
    // A listening-socket error after start has no caller to report to; keep the process alive.
    server.on('error', () => {});
    return proxy;
  }

  /** The current fault mode (see {@link TcpFaultProxy.setMode}). */
  get mode(): FaultMode {
    return this.policy.mode;
  }

  /** Switches the fault mode for current and future connections. */
  setMode(mode: FaultMode, options: { delayMs?: number } = {}): void {
    if (!['pass', 'stall', 'delay', 'reset'].includes(mode)) {
      throw new TypeError(
        `mode must be 'pass', 'stall', 'delay' or 'reset', got ${JSON.stringify(mode) ?? String(mode)}`,
      );
    }
    // A bare number (`setMode('delay', 500)`) would otherwise keep the old delay without a word.
    if (typeof options !== 'object' || options === null || Array.isArray(options)) {
      throw new TypeError(
        `setMode options must be an object such as { delayMs: 100 }, got ${JSON.stringify(options) ?? String(options)}`,
      );
    }
    const unknown = unknownKey('setMode options', options, ['delayMs']);
    if (unknown) throw new TypeError(unknown);
    const delayMs = options.delayMs ?? this.policy.delayMs;
    if (!Number.isFinite(delayMs) || delayMs < 0) {
      throw new TypeError(
        `delayMs must be a non-negative number, got ${JSON.stringify(delayMs) ?? String(delayMs)}`,
      );
    }
    this.policy = { mode, delayMs };
    for (const connection of [...this.connections]) {
      if (mode === 'reset') connection.reset();
      else connection.modeChanged();
    }
  }

  /**
   * Sends new connections to `target` (`host:port` or `http://host:port`) from now on and resets
   * the open ones, so a client reconnects to the new server at the same address: as when the
   * server behind an address is replaced (another cluster's member on a member's address, say).
   */
  retarget(target: string): void {
    this.target = parseTarget(target);
    for (const connection of [...this.connections]) connection.reset();
  }

  /** Number of proxied connections currently open (useful to assert a client reconnected). */
  get connectionCount(): number {
    return this.connections.size;
  }

  /** Stops listening and closes every connection. Idempotent. */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const connection of [...this.connections]) connection.destroy();
    });
    return this.closing;
  }

  /** {@link TcpFaultProxy.close}, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private accept(socket: Socket): void {
    if (this.closing) {
      socket.destroy();
      return;
    }
    if (this.policy.mode === 'reset') {
      socket.on('error', () => {});
      resetSocket(socket);
      return;
    }
    const connection = new ProxyConnection(
      socket,
      this.target,
      () => this.policy,
      (closed) => this.connections.delete(closed),
    );
    this.connections.add(connection);
  }
}

/** `host:port`, `http://host:port` or `[v6]:port` → host and port. */
export function parseTarget(target: string): ProxyTarget {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(target) ? target : `tcp://${target}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new TypeError(`target must be host:port or http://host:port, got "${target}"`);
  }
  const port = Number(url.port);
  if (!url.hostname || !Number.isInteger(port) || port <= 0) {
    throw new TypeError(`target must include a host and a port, got "${target}"`);
  }
  return { host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port };
}
