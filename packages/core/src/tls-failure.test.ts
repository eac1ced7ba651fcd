import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { isConnectError, isTlsError, type TlsError } from './errors.js';
import { connectFailure, describeTlsFailure, speaksTls, tlsFailureOf } from './tls-failure.js';

/** Last errors as @grpc/grpc-js 1.14 reports them against etcd 3.4 (taken from real runs). */
const last = (detail: string) =>
  new Error(`14 UNAVAILABLE: No connection established. Last error: ${detail}. Resolution note: `);

describe('tlsFailureOf', () => {
  it('tells the failures apart from what gRPC reports', () => {
    expect(tlsFailureOf(last('Error: unable to verify the first certificate'))).toBe(
      'untrusted-server',
    );
    expect(tlsFailureOf(last('Error: self-signed certificate in certificate chain'))).toBe(
      'untrusted-server',
    );
    expect(
      tlsFailureOf(
        last(
          "Error [ERR_TLS_CERT_ALTNAME_INVALID]: Hostname/IP does not match certificate's altnames: IP: 127.0.0.1 is not in the cert's list: ",
        ),
      ),
    ).toBe('name-mismatch');
    expect(
      tlsFailureOf(
        last(
          '802CE31D687F0000:error:0A000412:SSL routines:ssl3_read_bytes:sslv3 alert bad certificate:../deps/openssl/openssl/ssl/record/rec_layer_s3.c:1601:SSL alert number 42',
        ),
      ),
    ).toBe('client-cert-rejected');
    expect(
      tlsFailureOf(
        last(
          'Error: Client network socket disconnected before secure TLS connection was established',
        ),
      ),
    ).toBe('server-not-tls');
  });

  it('does not mistake other failures for TLS', () => {
    expect(tlsFailureOf(last('Error: connect ECONNREFUSED 127.0.0.1:2379'))).toBeUndefined();
    expect(tlsFailureOf(last('Failed to connect (2026-11-30T21:40:41.465Z)'))).toBeUndefined();
    expect(tlsFailureOf(new Error('etcdserver: permission denied'))).toBeUndefined();
    expect(tlsFailureOf('4 DEADLINE_EXCEEDED')).toBeUndefined();
  });

  it('says how to fix each failure', () => {
    expect(describeTlsFailure('untrusted-server')).toMatch(/tls\.caCert/);
    expect(describeTlsFailure('client-cert-rejected')).toMatch(/tls\.clientCert/);
    expect(describeTlsFailure('server-requires-tls')).toMatch(/https:\/\//);
  });
});

describe('speaksTls', () => {
  /** A TCP server on a free loopback port; `answer` gets each connection. */
  async function tcpServer(answer: (socket: Socket) => void) {
    const sockets = new Set<Socket>();
    const server = createTcpServer((socket) => {
      sockets.add(socket);
      answer(socket);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const close = async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    };
    return { port, close };
  }

  it('is false for a plaintext server, and for a closed port', async () => {
    const server = await tcpServer((socket) => socket.end('HTTP/1.1 400 Bad Request\r\n\r\n'));
    try {
      expect(await speaksTls(`http://127.0.0.1:${server.port}`, 2_000)).toBe(false);
    } finally {
      await server.close();
    }
    expect(await speaksTls(`http://127.0.0.1:${server.port}`, 2_000)).toBe(false);
  });

  it('is false when nothing answers before the deadline', async () => {
    const server = await tcpServer(() => {}); // accepts, never speaks
    try {
      expect(await speaksTls(`http://127.0.0.1:${server.port}`, 200)).toBe(false);
    } finally {
      await server.close();
    }
  });
});

describe('connectFailure', () => {
  const options = { endpoints: ['https://127.0.0.1:1'], dialTimeoutMs: 500, tls: {} };

  it('is a TlsError naming the endpoints and the fix once an attempt failed in TLS', async () => {
    const err = await connectFailure(options, 'no answer', new Error('x'), 'name-mismatch');
    expect(isTlsError(err)).toBe(true);
    expect((err as TlsError).failure).toBe('name-mismatch');
    expect(err.message).toMatch(/https:\/\/127\.0\.0\.1:1 within 500 ms .*subject alternative/);
  });

  it('is a plain ConnectError when nothing spoke, without checking for TLS', async () => {
    const plain = { endpoints: ['http://127.0.0.1:1'], dialTimeoutMs: 500 };
    const detail = 'could not reach etcd (14 UNAVAILABLE: connect ECONNREFUSED 127.0.0.1:1)';
    const err = await connectFailure(plain, detail, new Error(detail), undefined);
    expect(isConnectError(err) && !isTlsError(err)).toBe(true);
    expect(err.message).toContain('ECONNREFUSED');
  });
});
