import { connect as tlsConnect } from 'node:tls';
import { ConnectError, TlsError, type TlsFailure } from './errors.js';

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

/** What each failure means and how to fix it, for the error message. */
export function describeTlsFailure(failure: TlsFailure): string {
  switch (failure) {
    case 'untrusted-server':
      return "the server's certificate is not signed by tls.caCert (or it expired); pass the CA that signed etcd's --cert-file";
    case 'name-mismatch':
      return "the server's certificate does not name the endpoint's host; connect by a name or IP in its subject alternative names, or reissue it with them";
    case 'client-cert-rejected':
      return 'etcd requires a client certificate (--client-cert-auth) signed by its --trusted-ca-file and got none, or another; set tls.clientCert and tls.clientKey';
    case 'server-not-tls':
      return 'the server does not speak TLS; use http:// endpoints without tls, or enable TLS on etcd (--cert-file, --key-file)';
    case 'server-requires-tls':
      return 'the server speaks TLS; use https:// endpoints and set tls.caCert';
  }
}

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
    return new ConnectError(
      `could not reach etcd at ${at} ${within}: ${detail}`,
      options.endpoints,
      {
        cause,
      },
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
