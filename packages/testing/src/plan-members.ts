import { randomBytes } from 'node:crypto';
import { memberName, type MemberSpec } from './etcd-args.js';
import { freePort } from './free-port.js';

/** Names, free loopback ports and data dirs for a new cluster, plus its unique cluster token. */
export async function planMembers(
  count: number,
  dataDirOf: (name: string) => string,
  /** Give each member a plaintext control port (members serving clients over TLS). */
  control = false,
): Promise<{ token: string; specs: MemberSpec[] }> {
  const token = `leasehold-${randomBytes(4).toString('hex')}`;
  const specs: MemberSpec[] = [];
  for (let i = 0; i < count; i++) {
    const name = memberName(i);
    specs.push({
      name,
      clientPort: await freePort(),
      peerPort: await freePort(),
      dataDir: dataDirOf(name),
      ...(control ? { controlPort: await freePort() } : {}),
    });
  }
  return { token, specs };
}
