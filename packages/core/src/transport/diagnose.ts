/**
 * The one place that turns a failure of etcd3 or gRPC into a leasehold error: closed client,
 * refused credentials, no answer (unavailable: worth retrying), a TLS set-up that cannot work,
 * a permission the user's roles do not grant (naming the keys), or another refusal. Only
 * transport sees gRPC errors; everything above it sees these.
 */
import { connect as tlsConnect } from 'node:tls';
import { isBrokenCircuitError } from 'cockatiel';
import {
  GRPCDeadlineExceededError,
  isRecoverableError,
  type IRequestOp,
  type ITxnRequest,
} from 'etcd3';
import {
  AuthError,
  ClientClosedError,
  ConnectError,
  EtcdRequestError,
  EtcdUnavailableError,
  isLeaseholdError,
  PermissionDeniedError,
  TlsError,
  type LeaseholdError,
  type TlsFailure,
} from '../errors.js';
import { tunables } from '../options.js';

const AUTH_FAILURE =
  /authentication failed|user name is empty|user name not found|invalid auth token|auth: revision|authentication is not enabled/i;

/** Where a failed call was going and what it was, for the error's message. */
export interface FailedCall {
  /** The endpoints the client knows, for messages. */
  endpoints: readonly string[];
  /** Whether the client is closed: then every failure is `ClientClosedError`. */
  closed: boolean;
  /** The deadline the call (or attempt) ran into, for "no answer within" messages. */
  timeoutMs: number;
  /** Which limit that was. Default `callTimeoutMs`. */
  limit?: string | undefined;
  /** The keys the call touches, for a permission denial's message (only built then). */
  keys?: (() => string) | undefined;
}

/** `err` (from the call `what`) as a leasehold error. */
export function diagnose(what: string, err: unknown, call: FailedCall): LeaseholdError {
  if (isLeaseholdError(err)) return err;
  if (call.closed) return new ClientClosedError();
  const e = err instanceof Error ? err : new Error(String(err));
  const [at, cause] = [call.endpoints.join(', '), { cause: err }];
  if (AUTH_FAILURE.test(e.message)) {
    const fix = /not enabled/i.test(e.message)
      ? 'etcd has authentication disabled: leave out the auth option, or enable it on etcd (etcdctl auth enable)'
      : 'check auth.username and auth.password (etcd has authentication enabled)';
    return new AuthError(
      `etcd at ${at} refused the credentials for ${what}: ${e.message}; ${fix}`,
      cause,
    );
  }
  const unavailable = (why: string) =>
    new EtcdUnavailableError(`etcd ${what} failed: ${why}`, cause);
  if (isBrokenCircuitError(e)) {
    return unavailable(
      `every member (${at}) failed its last calls and rests ${tunables.breakerHalfOpenMs} ms before it is tried again`,
    );
  }
  if (e instanceof GRPCDeadlineExceededError) {
    return unavailable(
      `no answer from ${at} within ${call.timeoutMs} ms (${call.limit ?? 'callTimeoutMs'})`,
    );
  }
  if (isRecoverableError(e) && !/too large|larger than max/i.test(e.message)) {
    return unavailable(`could not reach etcd at ${at} (${grpcReason(e.message)})`);
  }
  if (PERMISSION_DENIED.test(e.message)) return permissionDenied(what, at, call.keys?.(), err);
  return new EtcdRequestError(`etcd ${what} was refused by ${at}: ${e.message}`, cause);
}

// --- TLS -------------------------------------------------------------------------------------

/**
 * TLS failures as gRPC reports them: its message carries Node's TLS error (our side refused the
 * server) or the OpenSSL alert the server sent (the server refused us).
 */
const PATTERNS: ReadonlyArray<[TlsFailure, RegExp]> = [
  ['name-mismatch', /ERR_TLS_CERT_ALTNAME_INVALID|does not match certificate's altnames/i],
  [
    'untrusted-server',
    /unable to verify the first certificate|self[- ]signed certificate|unable to get (local )?issuer certificate|certificate has expired|certificate is not yet valid|certificate signature failure/i,
  ],
  [
    'client-cert-rejected',
    /alert (bad certificate|unknown ca|certificate required|certificate unknown|handshake failure)|alert number (40|42|43|46|48|116)\b/i,
  ],
  [
    'server-not-tls',
    /socket disconnected before secure TLS connection|wrong version number|packet length too long|unexpected eof while reading/i,
  ],
];

/** Which TLS failure, if any, an error from etcd3 or gRPC reports. */
export function tlsFailureOf(err: unknown): TlsFailure | undefined {
  const message = err instanceof Error ? err.message : String(err);
  return PATTERNS.find(([, pattern]) => pattern.test(message))?.[0];
}

const TLS_FIXES: Record<TlsFailure, string> = {
  'untrusted-server':
    "the server's certificate is not signed by tls.caCert (or it expired); pass the CA that signed etcd's --cert-file",
  'name-mismatch':
    "the server's certificate does not name the endpoint's host; connect by a name or IP in its subject alternative names, or reissue it with them",
  'client-cert-rejected':
    'etcd requires a client certificate (--client-cert-auth) signed by its --trusted-ca-file and got none, or another; set tls.clientCert and tls.clientKey',
  'server-not-tls':
    'the server does not speak TLS; use http:// endpoints without tls, or enable TLS on etcd (--cert-file, --key-file)',
  'server-requires-tls': 'the server speaks TLS; use https:// endpoints and set tls.caCert',
};

/** What each failure means and how to fix it, for the error message. */
export const describeTlsFailure = (failure: TlsFailure): string => TLS_FIXES[failure];

/**
 * Whether `endpoint` (`http://host:port`) completes a TLS handshake within `timeoutMs`: it then
 * is a TLS server, and plaintext gRPC to it can never work. Certificates are not checked: the
 * question is only which protocol the server speaks.
 */
export function speaksTls(endpoint: string, timeoutMs: number): Promise<boolean> {
  const url = new URL(endpoint);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve) => {
    const socket = tlsConnect({
      host,
      port: Number(url.port),
      rejectUnauthorized: false,
      ALPNProtocols: ['h2'],
      // SNI must be a name; for an IP address none is sent.
      ...(/^[\d.]+$|:/.test(host) ? {} : { servername: host }),
    });
    const done = (answer: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once('secureConnect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('close', () => done(false));
  });
}

/**
 * What a gRPC failure says, without its wrapping: "14 UNAVAILABLE: No connection established.
 * Last error: Error: connect ECONNREFUSED 10.0.0.5:2379. Resolution note: " says
 * "connect ECONNREFUSED 10.0.0.5:2379"; a timestamp gRPC appends goes too.
 */
export function grpcReason(message: string): string {
  const last = /Last error: (?:\w*Error: )?(.*?)\.?(?: Resolution note:.*)?$/s.exec(message)?.[1];
  return (last || message).replace(/ \(\d{4}-\d\d-\d\dT[\d:.]+Z\)/g, '');
}

/** The reason in diagnose's "etcd connect failed: could not reach etcd at X (reason)". */
function dialReason(detail: string): string {
  const inner = detail.replace(/^etcd connect failed: /, '');
  return grpcReason(/^could not reach etcd at .*? \((.*)\)$/s.exec(inner)?.[1] ?? inner);
}

/**
 * gRPC's words for a server that took the connection but did not speak HTTP/2 gRPC: a port of
 * some other service (PostgreSQL, Redis, an HTTP server), or etcd's peer port.
 */
const NOT_GRPC = /Protocol error|Failed to connect|Received HTTP status code|Bad Request/i;

/** Failures that say no server spoke at all, so none can have spoken TLS. */
const NOT_A_SERVER =
  /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|no answer from/i;

/** Longest the plaintext-vs-TLS check may add to a failing `connect()`. */
const SPEAKS_TLS_TIMEOUT_MS = 1_000;

/**
 * The error `connect()` throws when no endpoint answered before `dialTimeoutMs`: a
 * {@link TlsError} when an attempt failed in the TLS handshake, or when an http endpoint turns
 * out to speak TLS (gRPC then only says "Failed to connect"); else a {@link ConnectError}.
 */
export async function connectFailure(
  options: { endpoints: string[]; dialTimeoutMs: number; tls?: unknown },
  detail: string,
  cause: unknown,
  seen: TlsFailure | undefined,
): Promise<ConnectError> {
  const at = options.endpoints.join(', ');
  const within = `within ${options.dialTimeoutMs} ms (dialTimeoutMs)`;
  detail = dialReason(detail);
  let failure = seen;
  // Only worth asking when the server answered something gRPC could not use: not for a refused
  // connection, an unknown host or silence (a frozen member would hold the check to its limit).
  if (failure === undefined && options.tls === undefined && !NOT_A_SERVER.test(detail)) {
    const tls = await Promise.all(
      options.endpoints.map((e) => speaksTls(e, SPEAKS_TLS_TIMEOUT_MS)),
    );
    if (tls.some(Boolean)) failure = 'server-requires-tls';
  }
  if (failure === undefined) {
    const hint =
      !NOT_A_SERVER.test(detail) && NOT_GRPC.test(detail)
        ? "; something answered but does not speak etcd's gRPC: is this an etcd client port " +
          "(etcd's --advertise-client-urls, 2379 by default; 2380 is the peer port)?"
        : '';
    return new ConnectError(
      `could not reach etcd at ${at} ${within}: ${detail}${hint}`,
      options.endpoints,
      { cause },
    );
  }
  return new TlsError(
    failure,
    `could not connect to etcd at ${at} ${within}: TLS failed (${failure}): ` +
      `${describeTlsFailure(failure)}. Last error: ${detail}`,
    options.endpoints,
    { cause },
  );
}

// --- permissions ------------------------------------------------------------------------------

/** etcd's RBAC refusal (`rpctypes.ErrPermissionDenied`). */
export const PERMISSION_DENIED = /etcdserver: permission denied/i;

type Bytes = Buffer | string | undefined;
interface KeyRange {
  key?: Bytes;
  range_end?: Bytes;
}

const text = (b: Bytes) => JSON.stringify(Buffer.from(b ?? '').toString());

/** `key "k"`, `prefix "p"` (the range etcd's `--prefix` means) or `range ["a", "b")`. */
export function describeRange({ key, range_end: end }: KeyRange): string {
  const k = Buffer.from(key ?? '');
  const e = Buffer.from(end ?? '');
  if (e.length === 0) return `key ${text(k)}`;
  if (e.equals(Buffer.from([0]))) return `range [${text(k)}, end of keyspace)`;
  // etcd's prefix end: the last byte below 0xff incremented, everything after it dropped.
  let last = k.length - 1;
  while (last >= 0 && k[last] === 0xff) last--;
  if (last >= 0 && e.length === last + 1 && k.subarray(0, last).equals(e.subarray(0, last))) {
    if (e[last] === k[last]! + 1) return `prefix ${text(k)}`;
  }
  return `range [${text(k)}, ${text(e)})`;
}

/** The distinct key ranges a set of ranges touches, for an error message. */
export function describeRanges(ranges: readonly KeyRange[]): string {
  const all = [...new Set(ranges.map(describeRange))];
  return all.length === 0 ? 'no keys' : all.join(', ');
}

/** Every key range a txn compares, reads or writes. */
export function rangesOfTxn(request: ITxnRequest): KeyRange[] {
  const ops = (list: IRequestOp[] | undefined): KeyRange[] =>
    (list ?? []).flatMap((op) => {
      const r = op.request_range ?? op.request_put ?? op.request_delete_range;
      return r ? [r] : op.request_txn ? rangesOfTxn(op.request_txn) : [];
    });
  return [
    ...(request.compare ?? []).map((c) => c as KeyRange),
    ...ops(request.success),
    ...ops(request.failure),
  ];
}

/** The typed refusal, naming the keys and the grant that would allow them. */
export function permissionDenied(
  what: string,
  at: string,
  keys: string | undefined,
  cause: unknown,
): PermissionDeniedError {
  const on = keys ?? 'unknown keys';
  return new PermissionDeniedError(
    on,
    `etcd at ${at} denied ${what} on ${on}: the user's roles do not grant it; grant a role ` +
      `readwrite on leasehold's prefixes (etcdctl role grant-permission <role> --prefix=true ` +
      `readwrite <prefix>)`,
    { cause },
  );
}
