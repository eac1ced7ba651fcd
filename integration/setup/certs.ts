import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A certificate and its key, as files and as PEM. */
export interface CertPair {
  certFile: string;
  keyFile: string;
  cert: Buffer;
  key: Buffer;
}

/** Everything a TLS test needs, generated with openssl into a fresh temp dir. */
export interface TestCerts extends AsyncDisposable {
  dir: string;
  /** The CA that signed `server`, `client` and `wrongName`. */
  ca: CertPair;
  /** A CA that signed nothing the server presents. */
  otherCa: CertPair;
  /** The server's certificate: SAN IP:127.0.0.1 and DNS:localhost. */
  server: CertPair;
  /** A server certificate signed by `ca` for another name only (DNS:etcd.invalid). */
  wrongName: CertPair;
  /** A client certificate (CN=svc) signed by `ca`. */
  client: CertPair;
  /** A client certificate signed by `otherCa`. */
  foreignClient: CertPair;
}

async function openssl(args: string[]): Promise<void> {
  await run('openssl', args, { timeout: 30_000 });
}

/** P-256 keys: fast to generate, and etcd and Node both accept them. */
const NEW_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

async function selfSigned(dir: string, name: string, cn: string): Promise<CertPair> {
  const [certFile, keyFile] = [join(dir, `${name}.crt`), join(dir, `${name}.key`)];
  await openssl([
    'req',
    '-x509',
    ...NEW_KEY,
    '-keyout',
    keyFile,
    '-out',
    certFile,
    '-days',
    '2',
    '-subj',
    `/CN=${cn}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  return load(certFile, keyFile);
}

async function signed(
  dir: string,
  name: string,
  ca: CertPair,
  cn: string,
  extensions: string,
): Promise<CertPair> {
  const [certFile, keyFile] = [join(dir, `${name}.crt`), join(dir, `${name}.key`)];
  const [csr, ext] = [join(dir, `${name}.csr`), join(dir, `${name}.ext`)];
  await openssl(['req', ...NEW_KEY, '-keyout', keyFile, '-out', csr, '-subj', `/CN=${cn}`]);
  await writeFile(ext, extensions);
  await openssl([
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    ca.certFile,
    '-CAkey',
    ca.keyFile,
    // A serial of its own per certificate: -CAcreateserial shares one ca.srl file, which
    // certificates signed at once read half-written ("Unable to load number from ca.srl").
    '-set_serial',
    `0x${randomBytes(16).toString('hex')}`,
    '-out',
    certFile,
    '-days',
    '2',
    '-extfile',
    ext,
  ]);
  return load(certFile, keyFile);
}

async function load(certFile: string, keyFile: string): Promise<CertPair> {
  return { certFile, keyFile, cert: await readFile(certFile), key: await readFile(keyFile) };
}

const SERVER_EXT =
  'extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n';
const CLIENT_EXT =
  'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n';

/** Generates a CA, server and client certificates, and the wrong ones the tests need. */
export async function makeTestCerts(): Promise<TestCerts> {
  const dir = await mkdtemp(join(tmpdir(), 'leasehold-certs-'));
  try {
    const [ca, otherCa] = await Promise.all([
      selfSigned(dir, 'ca', 'leasehold test CA'),
      selfSigned(dir, 'other-ca', 'unrelated test CA'),
    ]);
    const [server, wrongName, client, foreignClient] = await Promise.all([
      signed(dir, 'server', ca, 'etcd', `subjectAltName=IP:127.0.0.1,DNS:localhost\n${SERVER_EXT}`),
      signed(
        dir,
        'wrong-name',
        ca,
        'etcd.invalid',
        `subjectAltName=DNS:etcd.invalid\n${SERVER_EXT}`,
      ),
      signed(dir, 'client', ca, 'svc', CLIENT_EXT),
      signed(dir, 'foreign-client', otherCa, 'svc', CLIENT_EXT),
    ]);
    return {
      dir,
      ca,
      otherCa,
      server,
      wrongName,
      client,
      foreignClient,
      [Symbol.asyncDispose]: () => rm(dir, { recursive: true, force: true }),
    };
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}
