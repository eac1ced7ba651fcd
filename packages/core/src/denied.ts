import type { IRequestOp, ITxnRequest } from 'etcd3';
import { PermissionDeniedError } from './errors.js';

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
