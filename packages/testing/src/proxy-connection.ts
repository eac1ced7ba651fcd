import { connect, type Socket } from 'node:net';
import { Forwarder, type FaultPolicy } from './forwarder.js';

export interface ProxyTarget {
  host: string;
  port: number;
}

/** One accepted client socket and its upstream socket, with a forwarder each way. */
export class ProxyConnection {
  private readonly upstream: Socket;
  private readonly forwarders: Forwarder[];
  private closed = false;

  constructor(
    private readonly client: Socket,
    target: ProxyTarget,
    policy: () => FaultPolicy,
    private readonly onClosed: (connection: ProxyConnection) => void,
  ) {
    // Half-open allowed: each side's FIN is forwarded only after its queued bytes.
    this.upstream = connect({ host: target.host, port: target.port, allowHalfOpen: true });
    // No Nagle on either side: gRPC pings and small frames must not wait 40 ms for company.
    client.setNoDelay(true);
    this.upstream.setNoDelay(true);
    this.forwarders = [
      new Forwarder(client, this.upstream, policy),
      new Forwarder(this.upstream, client, policy),
    ];
    // An upstream failure (e.g. etcd down) reaches the client as a reset, the way a dead
    // server would look without the proxy.
    this.upstream.on('error', () => this.reset());
    client.on('error', () => this.reset());
    this.upstream.on('close', () => this.onSocketClosed());
    client.on('close', () => this.onSocketClosed());
    // Reading starts only now (the server pauses sockets on connect), under the current mode.
    for (const f of this.forwarders) f.pump();
  }

  /** Re-evaluates the mode: flushes after a stall, or holds traffic for a new stall. */
  modeChanged(): void {
    for (const f of this.forwarders) f.pump();
  }

  /** Sends RST both ways and forgets the connection. */
  reset(): void {
    if (this.closed) return;
    resetSocket(this.client);
    resetSocket(this.upstream);
    this.finish();
  }

  /** Plain close, for proxy shutdown. */
  destroy(): void {
    if (this.closed) return;
    this.client.destroy();
    this.upstream.destroy();
    this.finish();
  }

  private onSocketClosed(): void {
    // The client is gone: nobody is left to deliver upstream bytes to. An upstream that closed
    // cleanly has already queued its FIN behind its last bytes, so the client side ends itself.
    if (this.client.destroyed && !this.upstream.destroyed) this.upstream.destroy();
    if (this.client.destroyed && this.upstream.destroyed) this.finish();
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    for (const f of this.forwarders) f.dispose();
    this.onClosed(this);
  }
}

export function resetSocket(socket: Socket): void {
  if (socket.destroyed) return;
  try {
    socket.resetAndDestroy();
  } catch {
    socket.destroy();
  }
}
