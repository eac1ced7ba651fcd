/**
 * Which cluster this client talks to, and how far into its history it has seen. Revisions
 * restart when a cluster is rebuilt (a new cluster id) and drop back when it is restored from a
 * snapshot with the same member settings (the same cluster id): so every answer must carry the
 * cluster id seen at connect, and a linearizable answer must not carry a revision or a raft term
 * below what was known when its request was sent. A member can only answer linearizably at the
 * cluster's current term, and terms never drop in one cluster's life, but a restore brings the
 * old term back (and a restored history can catch up with the revision first).
 *
 * Either breach is final: the client has met another history, and every listener hears it once.
 */
import type { IResponseHeader } from 'etcd3';
import { ClusterChangedError } from '../errors.js';
import { Listeners } from '../latch.js';

/** What was known when a request was sent: its answer must be no older. */
export interface Known {
  revision: bigint;
  term: bigint;
}

/** The parts of etcd's response header identity looks at. */
export type Header = Pick<IResponseHeader, 'cluster_id' | 'revision' | 'raft_term'>;

export class Identity {
  #clusterId = '';
  /** Highest header revision seen on any answer: every one of them was committed. */
  #revision = 0n;
  /** Highest raft term seen on any answer. */
  #term = 0n;
  #answers = 0;
  #changed: ClusterChangedError | undefined;
  readonly #onChanged = new Listeners<ClusterChangedError>();

  /** The cluster id recorded at connect (decimal). */
  get clusterId(): string {
    return this.#clusterId;
  }

  /** How many answers have been checked so far: "has etcd answered since?" for give-up rules. */
  get answers(): number {
    return this.#answers;
  }

  /** The change this client met, if it met one. */
  get changed(): ClusterChangedError | undefined {
    return this.#changed;
  }

  /** What is known now, for checking the answer to a request sent now. */
  known(): Known {
    return { revision: this.#revision, term: this.#term };
  }

  /** Takes the connect probe's answer as the cluster this client belongs to. */
  start(header: Header): void {
    this.#clusterId = header.cluster_id;
    this.#revision = BigInt(header.revision);
    this.#term = BigInt(header.raft_term);
  }

  /**
   * Checks an answer's header: the cluster id always; revision and term too for a linearizable
   * answer (pass what was `known()` when its request was sent). Stream answers (keepalive,
   * watch) may come from a lagging member, so only their cluster id is checked. Throws
   * {@link ClusterChangedError} on a breach, after telling every listener.
   */
  check(header: Header, known?: Known): void {
    if (this.#changed) throw this.#changed;
    const [revision, term] = [BigInt(header.revision), BigInt(header.raft_term)];
    let detail: string | undefined;
    if (header.cluster_id !== this.#clusterId) {
      detail = `it answered with cluster id ${header.cluster_id}, not ${this.#clusterId} as at connect (rebuilt cluster or a foreign member)`;
    } else if (known && (revision < known.revision || term < known.term)) {
      detail = `a linearizable answer carried revision ${revision} and raft term ${term} after revision ${known.revision} and term ${known.term} had been seen (restored from a snapshot?)`;
    }
    if (detail !== undefined) {
      this.#changed = new ClusterChangedError(0n, detail);
      this.#onChanged.emit(this.#changed);
      this.#onChanged.clear();
      throw this.#changed;
    }
    if (revision > this.#revision) this.#revision = revision;
    if (term > this.#term) this.#term = term;
    this.#answers++;
  }

  /** Tells `listener` once if the client meets another cluster (or a rewound history). */
  onChanged(listener: (error: ClusterChangedError) => void): Disposable {
    return this.#onChanged.add(listener);
  }

  /** No more listeners: the client is closed. */
  close(): void {
    this.#onChanged.clear();
  }
}
