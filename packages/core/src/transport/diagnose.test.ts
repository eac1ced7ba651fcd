import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  isConnectError,
  isEtcdRequestError,
  isPermissionDeniedError,
  isTlsError,
  type TlsError,
} from '../errors.js';
import { prefixEnd } from '../keys.js';
import {
  connectFailure,
  grpcReason,
  describeRange,
  describeRanges,
  describeTlsFailure,
  permissionDenied,
  rangesOfTxn,
  speaksTls,
  tlsFailureOf,
} from './diagnose.js';

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

describe('connect failure messages', () => {
  const plain = { endpoints: ['http://127.0.0.1:1'], dialTimeoutMs: 500 };
  const grpc = (last: string) =>
    `etcd connect failed: could not reach etcd at http://127.0.0.1:1 (14 UNAVAILABLE: No connection established. Last error: ${last}. Resolution note: )`;

  it("says where, how long and gRPC's last error once, without its wrapping", async () => {
    const err = await connectFailure(
      plain,
      grpc('Error: connect ECONNREFUSED 127.0.0.1:1'),
      0,
      undefined,
    );
    expect(err.message).toBe(
      'could not reach etcd at http://127.0.0.1:1 within 500 ms (dialTimeoutMs): connect ECONNREFUSED 127.0.0.1:1',
    );
  });

  it('asks whether the port is an etcd client port when something else answered', async () => {
    const err = await connectFailure(
      plain,
      grpc('Protocol error (2026-12-02T05:45:57.381Z)'),
      0,
      undefined,
    );
    expect(err.message).toMatch(
      /\(dialTimeoutMs\): Protocol error; something answered but does not speak etcd's gRPC: is this an etcd client port/,
    );
    expect(err.message).not.toMatch(/Resolution note|2026-12-02/);
  });

  it('keeps a deadline message as it is', async () => {
    const detail =
      'etcd connect failed: no answer from http://127.0.0.1:1 within 500 ms (callTimeoutMs)';
    const err = await connectFailure(plain, detail, 0, undefined);
    expect(err.message).toMatch(
      /\(dialTimeoutMs\): no answer from http:\/\/127\.0\.0\.1:1 within 500 ms \(callTimeoutMs\)$/,
    );
  });

  it('grpcReason leaves other messages alone', () => {
    expect(grpcReason('4 DEADLINE_EXCEEDED: x')).toBe('4 DEADLINE_EXCEEDED: x');
  });
});

describe('describeRange', () => {
  it('names a key, a prefix and a plain range', () => {
    expect(describeRange({ key: Buffer.from('/a/b') })).toBe('key "/a/b"');
    const p = '/leasehold/lock/';
    expect(describeRange({ key: Buffer.from(p), range_end: prefixEnd(p) })).toBe(
      'prefix "/leasehold/lock/"',
    );
    expect(describeRange({ key: Buffer.from('a'), range_end: Buffer.from('c') })).toBe(
      'range ["a", "c")',
    );
    expect(describeRange({ key: Buffer.from('a'), range_end: Buffer.from([0]) })).toBe(
      'range ["a", end of keyspace)',
    );
  });

  it('recognises the prefix end of keys ending in 0xff bytes', () => {
    const key = Buffer.from([0x61, 0xff, 0xff]);
    expect(describeRange({ key, range_end: Buffer.from([0x62]) })).toMatch(/^prefix/);
    expect(describeRange({ key, range_end: Buffer.from([0x63]) })).toMatch(/^range/);
  });
});

describe('describeRanges and rangesOfTxn', () => {
  it('lists every distinct range a txn compares, reads or writes', () => {
    const key = Buffer.from('/l/a/1');
    const ranges = rangesOfTxn({
      compare: [{ key, target: 'Create', result: 'Equal', create_revision: 0 }],
      success: [{ request_put: { key, value: Buffer.from('v') } }],
      failure: [{ request_range: { key: Buffer.from('/l/a/'), range_end: prefixEnd('/l/a/') } }],
    });
    expect(describeRanges(ranges)).toBe('key "/l/a/1", prefix "/l/a/"');
    expect(describeRanges([])).toBe('no keys');
  });
});

describe('permissionDenied', () => {
  it('is a typed refusal naming the keys and the fix', () => {
    const cause = new Error('7 PERMISSION_DENIED: etcdserver: permission denied');
    const err = permissionDenied('lock first', 'http://a:1', 'prefix "/x/"', cause);
    expect(isPermissionDeniedError(err)).toBe(true);
    expect(isEtcdRequestError(err)).toBe(true);
    expect(err).toMatchObject({ name: 'PermissionDeniedError', code: 'PERMISSION_DENIED' });
    expect(err.keys).toBe('prefix "/x/"');
    expect(err.cause).toBe(cause);
    expect(err.message).toMatch(/lock first on prefix "\/x\/".*grant-permission/);
  });
});
