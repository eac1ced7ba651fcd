import { describe, expect, it } from 'vitest';
import {
  claimRequest,
  decodeRecord,
  encodeRecord,
  finishRequest,
  jobKeys,
  readClaim,
  readMarker,
  readHistory,
  recordError,
  type FireRecord,
  type TxnResponse,
} from './claims.js';
import { rotationSeconds } from './retention.js';

const FIRE = Date.parse('2025-03-10T12:00:05.000Z');
const keys = jobKeys('/p/', 'reports/daily');
const record: FireRecord = {
  v: 1,
  job: 'reports/daily',
  fireTime: '2025-03-10T12:00:05.000Z',
  runner: 'web-1:42',
  instance: 'me',
  attempt: 'scheduled',
  claimedAt: '2025-03-10T12:00:05.010Z',
  state: 'running',
};
const header = (revision: number) => ({
  revision: String(revision),
  cluster_id: '1',
  member_id: '1',
  raft_term: '2',
});
const kv = (key: string, value: string, createRevision: number) => ({
  key: Buffer.from(key),
  value: Buffer.from(value),
  create_revision: String(createRevision),
  mod_revision: String(createRevision),
  version: '1',
  lease: '0',
});
const range = (...kvs: ReturnType<typeof kv>[]) => ({
  response_range: { header: header(0), kvs, more: false, count: String(kvs.length) },
});
const response = (succeeded: boolean, responses: unknown[], revision = 100) =>
  ({ header: header(revision), succeeded, responses }) as unknown as TxnResponse;
const str = (b: Buffer | undefined) => b?.toString();

describe('keys', () => {
  it('lay out record, claim and running marker per job, escaped, sorted by fire time', () => {
    expect(keys.record(FIRE)).toBe('/p/reports%2Fdaily/fire/2025-03-10T12:00:05.000Z');
    expect(keys.claim(FIRE)).toBe('/p/reports%2Fdaily/claim/2025-03-10T12:00:05.000Z');
    expect(keys.running).toBe('/p/reports%2Fdaily/running');
    expect(keys.records).toEqual(['/p/reports%2Fdaily/fire/', '/p/reports%2Fdaily/fire0']);
    // `reports` never reads the keys of `reports/daily`.
    expect(keys.record(FIRE).startsWith(jobKeys('/p/', 'reports').records[0])).toBe(false);
  });
});

describe('claimRequest', () => {
  it("with overlap 'allow': create the record and the claim if the record is absent", () => {
    const req = claimRequest({
      keys,
      fireMs: FIRE,
      overlap: 'allow',
      runnerLease: 0x694dn,
      retentionLease: '777',
      record,
    });
    expect(req.compare).toHaveLength(1);
    expect(req.compare![0]).toMatchObject({
      target: 'Create',
      result: 'Equal',
      create_revision: '0',
    });
    expect(str(req.compare![0]!.key)).toBe(keys.record(FIRE));
    const [putRecord, putClaim] = req.success!;
    expect(str(putRecord!.request_put!.key)).toBe(keys.record(FIRE));
    expect(putRecord!.request_put!.lease).toBe('777'); // the retention lease
    expect(decodeRecord(putRecord!.request_put!.value)).toEqual(record);
    expect(str(putClaim!.request_put!.key)).toBe(keys.claim(FIRE));
    expect(putClaim!.request_put!.lease).toBe(String(0x694dn)); // the runner's lease
    expect(req.success).toHaveLength(2);
    expect(str(req.failure![0]!.request_range!.key)).toBe(keys.record(FIRE));
  });

  it("with overlap 'skip': also requires and creates the running marker on the runner's lease", () => {
    const req = claimRequest({
      keys,
      fireMs: FIRE,
      overlap: 'skip',
      runnerLease: 5n,
      retentionLease: '9',
      record,
    });
    expect(req.compare!.map((c) => str(c.key))).toEqual([keys.record(FIRE), keys.running]);
    const marker = req.success![2]!.request_put!;
    expect(str(marker.key)).toBe(keys.running);
    expect(marker.lease).toBe('5');
    expect(JSON.parse(str(marker.value)!)).toEqual({
      fireTime: record.fireTime,
      runner: 'web-1:42',
      instance: 'me',
    });
    expect(req.failure!.map((op) => str(op.request_range!.key))).toEqual([
      keys.record(FIRE),
      keys.running,
    ]);
  });

  it("with overlap 'replace': rewrites the marker if it is absent or names an earlier fire, never a later one", () => {
    const req = claimRequest({
      keys,
      fireMs: FIRE,
      overlap: 'replace',
      runnerLease: 5n,
      retentionLease: '9',
      record,
    });
    expect(req.compare!.map((c) => str(c.key))).toEqual([keys.record(FIRE), keys.running]);
    const marker = req.success![2]!.request_put!;
    expect(str(marker.key)).toBe(keys.running);
    expect(marker.lease).toBe('5');
    const [range, running, nested] = req.failure!;
    expect([str(range!.request_range!.key), str(running!.request_range!.key)]).toEqual([
      keys.record(FIRE),
      keys.running,
    ]);
    const txn = nested!.request_txn!;
    expect(txn.success).toEqual(req.success);
    expect(str(txn.compare![0]!.key)).toBe(keys.record(FIRE));
    const [, older] = txn.compare!;
    expect(older).toMatchObject({ target: 'Value', result: 'Less' });
    expect(str(older!.key)).toBe(keys.running);
    // Byte order of marker values is fire-time order: earlier below, same or later not.
    const bound = Buffer.from(older!.value!);
    const markerOf = (fireTime: string) =>
      Buffer.from(JSON.stringify({ fireTime, runner: 'x', instance: 'y' }));
    const at = (ms: number) => new Date(ms).toISOString();
    expect(Buffer.compare(markerOf(at(FIRE - 1)), bound)).toBe(-1);
    expect(Buffer.compare(markerOf(at(FIRE)), bound)).toBe(1);
    expect(Buffer.compare(markerOf(at(FIRE + 1)), bound)).toBe(1);
  });
});

describe('readClaim', () => {
  it("a won claim's token is the transaction's revision (the keys' create revision)", () => {
    expect(readClaim(response(true, [], 812), 'me')).toEqual({
      kind: 'claimed',
      token: 812n,
      adopted: false,
    });
  });

  it("'replace' over the marker of an earlier fire's run (the nested transaction): claimed, with the transaction's revision", () => {
    const marker = kv(keys.running, JSON.stringify({ fireTime: '2025-03-10T12:00:04.000Z' }), 77);
    const nested = (succeeded: boolean) => ({ response_txn: { succeeded, responses: [] } });
    const won = response(false, [range(), range(marker), nested(true)], 812);
    expect(readClaim(won, 'me')).toEqual({ kind: 'claimed', token: 812n, adopted: false });
    const later = response(false, [range(), range(marker), nested(false)], 812);
    expect(readClaim(later, 'me').kind).toBe('overlap');
  });

  it('a record of another claimer: claimed elsewhere, with its runner and token', () => {
    const other = { ...record, instance: 'them', runner: 'web-2:7' };
    const res = response(false, [range(kv(keys.record(FIRE), JSON.stringify(other), 81))]);
    expect(readClaim(res, 'me')).toEqual({
      kind: 'claimed-elsewhere',
      holder: { runner: 'web-2:7', token: 81n, fireTime: record.fireTime },
    });
  });

  it('a running record of this instance: an earlier attempt landed, so it is adopted', () => {
    const res = response(false, [range(kv(keys.record(FIRE), JSON.stringify(record), 81))]);
    expect(readClaim(res, 'me')).toEqual({ kind: 'claimed', token: 81n, adopted: true });
  });

  it("an adopted claim carries the running marker as the retry found it: a later 'replace' claim may have rewritten it", () => {
    const found = (marker?: ReturnType<typeof kv>) =>
      readClaim(
        response(false, [
          range(kv(keys.record(FIRE), JSON.stringify(record), 81)),
          marker ? range(marker) : range(),
        ]),
        'me',
      );
    const ours = kv(
      keys.running,
      JSON.stringify({ fireTime: record.fireTime, runner: 'web-1:42' }),
      81,
    );
    expect(found(ours)).toMatchObject({ adopted: true, token: 81n, marker: { token: 81n } });
    const later = {
      ...kv(
        keys.running,
        JSON.stringify({ fireTime: '2025-03-10T12:00:06.000Z', runner: 'web-2:7' }),
        81,
      ),
      mod_revision: '95',
    };
    expect(found(later)).toEqual({
      kind: 'claimed',
      token: 81n,
      adopted: true,
      marker: { fireTime: '2025-03-10T12:00:06.000Z', runner: 'web-2:7', token: 95n },
    });
    expect(found(undefined)).toEqual({ kind: 'claimed', token: 81n, adopted: true });
  });

  it('a finished record of this instance is never adopted: the fire ran already', () => {
    const done = { ...record, state: 'finished', outcome: 'ok' };
    const res = response(false, [range(kv(keys.record(FIRE), JSON.stringify(done), 81))]);
    expect(readClaim(res, 'me').kind).toBe('claimed-elsewhere');
  });

  it('a key that is not a record still holds the fire', () => {
    const res = response(false, [range(kv(keys.record(FIRE), 'garbage', 3))]);
    expect(readClaim(res, 'me')).toEqual({
      kind: 'claimed-elsewhere',
      holder: { runner: undefined, token: 3n, fireTime: undefined },
    });
  });

  it('no record but the running marker: overlap, with the running fire, its token and instance', () => {
    const marker = JSON.stringify({
      fireTime: '2025-03-10T12:00:04.000Z',
      runner: 'web-3:1',
      instance: 'them',
    });
    const res = response(false, [range(), range(kv(keys.running, marker, 77))]);
    expect(readClaim(res, 'me')).toEqual({
      kind: 'overlap',
      holder: { runner: 'web-3:1', token: 77n, fireTime: '2025-03-10T12:00:04.000Z' },
      instance: 'them',
    });
  });

  it("a marker rewritten by 'replace' names the run of its mod revision, not its create revision", () => {
    const marker = { ...kv(keys.running, JSON.stringify({ runner: 'web-3:1' }), 77) };
    marker.mod_revision = '90';
    expect(readMarker(marker)).toEqual({ runner: 'web-3:1', token: 90n });
    expect(readMarker(undefined)).toBeUndefined();
  });
});

describe('finishRequest', () => {
  it('updates the record only while it is this claim (create revision = token), keeping its lease', () => {
    const done: FireRecord = { ...record, state: 'finished', outcome: 'ok', durationMs: 12 };
    const req = finishRequest({ keys, fireMs: FIRE, token: 81n, overlap: 'skip', record: done });
    expect(req.compare).toEqual([
      expect.objectContaining({ target: 'Create', result: 'Equal', create_revision: '81' }),
    ]);
    expect(str(req.compare![0]!.key)).toBe(keys.record(FIRE));
    const [put, del, marker] = req.success!;
    expect(put!.request_put!.ignore_lease).toBe(true);
    expect(put!.request_put!.lease).toBeUndefined();
    expect(decodeRecord(put!.request_put!.value)).toEqual(done);
    expect(str(del!.request_delete_range!.key)).toBe(keys.claim(FIRE));
    // The marker goes only if it is still this run's (a replacing claim rewrites it).
    expect(marker!.request_txn!.compare![0]).toMatchObject({ target: 'Mod', mod_revision: '81' });
    expect(str(marker!.request_txn!.success![0]!.request_delete_range!.key)).toBe(keys.running);
    const allow = finishRequest({ keys, fireMs: FIRE, token: 81n, overlap: 'allow', record: done });
    expect(allow.success).toHaveLength(2);
    const replace = finishRequest({
      keys,
      fireMs: FIRE,
      token: 81n,
      overlap: 'replace',
      record: done,
    });
    expect(replace.success![2]!.request_txn!.compare![0]).toMatchObject({ mod_revision: '81' });
  });
});

describe('records', () => {
  it('round-trip, and anything else decodes to undefined', () => {
    expect(decodeRecord(encodeRecord(record))).toEqual(record);
    expect(decodeRecord(Buffer.from('{"v":2}'))).toBeUndefined();
    expect(decodeRecord(Buffer.from('nope'))).toBeUndefined();
    expect(decodeRecord(undefined)).toBeUndefined();
  });

  it('keep short error texts', () => {
    expect(recordError(new TypeError('bad'))).toBe('TypeError: bad');
    expect(recordError('plain')).toBe('plain');
    expect(recordError({ code: 7 })).toBe('{"code":7}');
    expect(recordError(undefined)).toBeUndefined();
    expect(recordError(new Error('x'.repeat(5000)))!.length).toBeLessThan(1100);
  });

  it('history: running while the claim lives, lost when it is gone, else the outcome', () => {
    const at = (s: number) => Date.parse(`2025-03-10T12:00:0${s}.000Z`);
    const rec = (s: number, extra: Partial<FireRecord>) =>
      kv(
        keys.record(at(s)),
        JSON.stringify({ ...record, fireTime: new Date(at(s)).toISOString(), ...extra }),
        10 + s,
      );
    const res = response(true, [
      range(
        rec(7, {}),
        rec(6, {}),
        rec(5, {
          state: 'finished',
          outcome: 'timed-out',
          durationMs: 900,
          error: 'MaxRunTimeError: x',
        }),
        kv(keys.record(at(4)), 'not ours', 3),
      ),
      range(kv(keys.claim(at(7)), '', 17)),
    ]);
    const entries = readHistory(res, keys, 'reports/daily');
    expect(entries.map((e) => [e.fireTime.toISOString().slice(17), e.token, e.outcome])).toEqual([
      ['07.000Z', 17n, 'running'],
      ['06.000Z', 16n, 'lost'],
      ['05.000Z', 15n, 'timed-out'],
    ]);
    expect(entries[2]).toMatchObject({
      durationMs: 900,
      error: 'MaxRunTimeError: x',
      runner: 'web-1:42',
    });
  });
});

describe('retention leases', () => {
  it('rotate every tenth of retention, at least every second', () => {
    expect(rotationSeconds(86_400)).toBe(8_640);
    expect(rotationSeconds(60)).toBe(6);
    expect(rotationSeconds(5)).toBe(1);
  });
});
