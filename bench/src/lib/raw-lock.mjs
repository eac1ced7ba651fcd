// The raw etcd requests an uncontended lock cycle needs, the baseline leasehold is measured
// against: the join txn (create the key on the lease if absent, read the queue's keys) and the
// delete guarded by the key's create revision.

/** The end of the range of keys starting with `prefix`. */
export const prefixEnd = (prefix) => {
  const end = Buffer.from(prefix);
  end[end.length - 1]++;
  return end;
};

/** One join + guarded delete of `<range><lease hex>` on `leaseId`, through etcd3's raw kv. */
export function rawLockCycle(raw, range, leaseId) {
  const key = Buffer.from(`${range}${BigInt(leaseId).toString(16)}`);
  const value = Buffer.from('bench');
  const queue = { key: Buffer.from(range), range_end: prefixEnd(range), keys_only: true };
  return async () => {
    const join = await raw.kv.txn({
      compare: [{ key, target: 'Create', result: 'Equal', create_revision: '0' }],
      success: [{ request_put: { key, value, lease: leaseId } }, { request_range: queue }],
      failure: [{ request_range: { key } }],
    });
    await raw.kv.txn({
      compare: [{ key, target: 'Create', result: 'Equal', create_revision: join.header.revision }],
      success: [{ request_delete_range: { key } }],
      failure: [],
    });
  };
}

/** The cycles compared against it: leasehold acquire + release, and etcd3 Lock's. */
export const leaseholdCycle = (client) => async () => {
  const lock = await client.acquire('n', { value: 'bench' });
  await lock.release();
};

export const etcd3Cycle = (raw, name) => async () => {
  const lock = raw.lock(name);
  await lock.acquire();
  await lock.release();
};
