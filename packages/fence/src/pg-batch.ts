import type { ClientBase, Connection, Submittable } from 'pg';

/**
 * Several parameterised statements sent to PostgreSQL in one round trip: each as Parse, Bind,
 * (Describe,) Execute, then a single Sync. The server runs them in order; the first error skips
 * the rest up to the Sync, and outside a `BEGIN` block everything before the Sync is one implicit
 * transaction that commits at the Sync, or rolls back if any statement failed.
 *
 * node-postgres answers each query before it sends the next, so `BEGIN` and the fence advance as
 * two queries cost two round trips; this is how a fenced write keeps the plain write's count while
 * every value, the token above all, stays a bound parameter. It is an ordinary `Submittable`,
 * the interface pg-cursor and pg-query-stream use, so it queues behind the client's other queries.
 */

export interface BatchStatement {
  text: string;
  /** Bound as text; `null` is SQL NULL. */
  values: readonly (string | null)[];
  /** Send a Describe so rows come back typed through the client's parsers (see {@link rows}). */
  describe?: boolean;
  /**
   * Prepare it under this name, once per connection, so later batches skip Parse and planning.
   * The name must be unique to `text`.
   */
  name?: string;
}

// Statement names this package prepared on a connection and saw succeed. A batch that failed
// leaves its names unknown: they are dropped here and re-sent as Close (a no-op when absent)
// then Parse, so a statement the server did or did not create is never parsed twice by name.
const prepared = new WeakMap<object, Set<string>>();

export interface BatchResult {
  /** The command tag, e.g. `UPDATE 1`. */
  command: string;
  /** Rows affected or returned, from the command tag; `null` when the tag has no count. */
  rowCount: number | null;
  fields: { name: string; dataTypeID: number }[];
  /** Raw text values, in column order. */
  rawRows: (string | null)[][];
}

/** A statement of the batch failed: `index` says which; `cause` is pg's own error. */
export class BatchError extends Error {
  constructor(
    readonly index: number,
    override readonly cause: unknown,
  ) {
    super(cause instanceof Error ? cause.message : String(cause));
    this.name = 'BatchError';
  }
}

interface Field {
  name: string;
  dataTypeID: number;
}

class Batch implements Submittable {
  readonly results: BatchResult[] = [];
  private failed = false;
  private names: Set<string> | undefined;

  /**
   * Named `callback` because pg wraps it when the client has `query_timeout`: its timer is then
   * cleared when the batch settles, and a timeout settles the batch with pg's error.
   */
  constructor(
    private readonly statements: readonly BatchStatement[],
    public callback: (err: unknown, results?: BatchResult[]) => void,
  ) {}

  submit(connection: Connection): void {
    // One write for all messages (as pg's own Query does): separate small writes would each go
    // out as a packet.
    const stream = connection.stream as Connection['stream'] & { cork?(): void; uncork?(): void };
    const c = connection as unknown as {
      parse(q: { text: string; name?: string; types?: number[] }): void;
      bind(b: { statement?: string; portal?: string; values: readonly (string | null)[] }): void;
      describe(d: { type: 'P'; name: string }): void;
      close(d: { type: 'S'; name: string }): void;
      execute(e: { portal?: string; rows?: number }): void;
      sync(): void;
    };
    let names = prepared.get(connection);
    if (names === undefined) prepared.set(connection, (names = new Set()));
    this.names = names;
    stream.cork?.();
    try {
      for (const statement of this.statements) {
        const name = statement.name;
        if (name === undefined) {
          c.parse({ text: statement.text, types: [] });
        } else if (!names.has(name)) {
          c.close({ type: 'S', name });
          c.parse({ text: statement.text, name, types: [] });
        }
        c.bind({ statement: name, values: statement.values });
        if (statement.describe === true) c.describe({ type: 'P', name: '' });
        c.execute({ rows: 0 });
      }
      c.sync();
    } finally {
      stream.uncork?.();
    }
  }

  private get current(): BatchResult {
    let result = this.results[this.results.length - 1];
    if (result === undefined || result.command !== '') {
      result = { command: '', rowCount: null, fields: [], rawRows: [] };
      this.results.push(result);
    }
    return result;
  }

  handleRowDescription(msg: { fields: Field[] }): void {
    this.current.fields = msg.fields.map((f) => ({ name: f.name, dataTypeID: f.dataTypeID }));
  }

  handleDataRow(msg: { fields: (string | Buffer | null)[] }): void {
    this.current.rawRows.push(msg.fields.map((v) => (v === null ? null : String(v))));
  }

  handleCommandComplete(msg: { text: string }): void {
    const result = this.current;
    result.command = msg.text;
    const count = /(\d+)$/.exec(msg.text);
    result.rowCount = count === null ? null : Number(count[1]);
  }

  handleEmptyQuery(): void {
    this.current.command = 'EMPTY';
  }

  handleError(err: unknown): void {
    if (this.failed) return;
    this.failed = true;
    for (const statement of this.statements) {
      if (statement.name !== undefined) this.names?.delete(statement.name);
    }
    // Statements that completed have a tag; the first without one is where it failed.
    const index = this.results.filter((r) => r.command !== '').length;
    this.callback(new BatchError(index, err));
  }

  handleReadyForQuery(): void {
    if (this.failed) return;
    for (const statement of this.statements) {
      if (statement.name !== undefined) this.names?.add(statement.name);
    }
    this.callback(null, this.results);
  }

  handlePortalSuspended(): void {}

  handleCopyInResponse(connection: Connection): void {
    (connection as unknown as { sendCopyFail(msg: string): void }).sendCopyFail(
      'COPY is not supported in a fenced statement',
    );
  }

  handleCopyData(): void {}
}

/**
 * Runs `statements` in one round trip on `client`. Rejects with a {@link BatchError} naming the
 * statement that failed.
 */
export function batch(
  client: ClientBase,
  statements: readonly BatchStatement[],
): Promise<BatchResult[]> {
  return new Promise((resolve, reject) => {
    const submittable = new Batch(statements, (err, results) =>
      err === null
        ? resolve(results!)
        : reject(err instanceof Error ? err : new Error('pg batch failed', { cause: err })),
    );
    // The overload that takes a Submittable returns it, not a promise; settle comes from above.
    client.query(submittable);
  });
}

/** `result`'s rows as objects, each value parsed by `client`'s type parsers (as `pg` would). */
export function rows<R>(client: ClientBase, result: BatchResult): R[] {
  const parsers = result.fields.map((f) =>
    (
      client as unknown as { getTypeParser(oid: number, format: 'text'): (v: string) => unknown }
    ).getTypeParser(f.dataTypeID, 'text'),
  );
  return result.rawRows.map((raw) => {
    const row: Record<string, unknown> = {};
    result.fields.forEach((f, i) => {
      const v = raw[i];
      row[f.name] = v === null || v === undefined ? null : parsers[i]!(v);
    });
    return row as R;
  });
}
