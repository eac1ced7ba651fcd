// Client CPU per uncontended cycle: leasehold acquire + release against the raw requests it
// needs, measured with process.cpuUsage() (insensitive to what else the host is doing).
//   node bench/cpu-cycle.mjs [cycles]
import { Etcd3 } from 'etcd3';
import { connect } from '@leasehold/core';
import { startEtcd } from '@leasehold/testing';
import { leaseholdCycle, rawLockCycle } from './src/lib/raw-lock.mjs';

const cycles = Number(process.argv[2] ?? 2000);
const etcd = await startEtcd({ provider: 'binary' });
try {
  const raw = new Etcd3({ hosts: etcd.endpoints });
  const client = await connect({ endpoints: etcd.endpoints, lockPrefix: '/cpu/l/' });
  await client.sharedSession();
  const lease = raw.lease(60, { autoKeepAlive: true });
  const leaseId = await lease.grant();
  const ops = { raw: rawLockCycle(raw, '/cpu/raw/n/', leaseId), leasehold: leaseholdCycle(client) };
  const cpu = { raw: 0, leasehold: 0 };
  for (let round = 0; round < 10; round++) {
    for (const [name, op] of Object.entries(ops)) {
      for (let i = 0; i < 30; i++) await op(); // warm
      const before = process.cpuUsage();
      for (let i = 0; i < cycles / 10; i++) await op();
      const used = process.cpuUsage(before);
      cpu[name] += used.user + used.system;
    }
  }
  const per = (n) => cpu[n] / cycles;
  console.log(
    `client CPU per cycle: raw ${per('raw').toFixed(0)} µs, leasehold ${per('leasehold').toFixed(0)} µs (${(per('leasehold') / per('raw')).toFixed(2)}×)`,
  );
  await lease.revoke();
  await client.close();
  raw.close();
} finally {
  await etcd.close();
}
