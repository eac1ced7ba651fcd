/** mulberry32: a small seeded PRNG, so a run's fault choices replay from its seed. */
export interface Random {
  /** In [0, 1). */
  next(): number;
  /** A whole number in [lo, hi]. */
  between(lo: number, hi: number): number;
  pick<T>(items: readonly T[]): T;
  /** Shuffles `items` in place (Fisher–Yates) and returns it. */
  shuffle<T>(items: T[]): T[];
}

export function prng(seed: number): Random {
  let a = seed >>> 0;
  const next = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const between = (lo: number, hi: number): number => lo + Math.floor(next() * (hi - lo + 1));
  return {
    next,
    between,
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!,
    shuffle: <T>(items: T[]): T[] => {
      for (let i = items.length - 1; i > 0; i--) {
        const j = between(0, i);
        [items[i], items[j]] = [items[j]!, items[i]!];
      }
      return items;
    },
  };
}

/** `FAULTS_SEED` when set (to replay a run), else a fresh random seed. */
export function runSeed(): number {
  const fromEnv = process.env.FAULTS_SEED;
  if (fromEnv !== undefined && fromEnv.trim() !== '') {
    const seed = Number(fromEnv);
    if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
      throw new Error(`FAULTS_SEED must be a whole number from 0 to 4294967295, got "${fromEnv}"`);
    }
    return seed;
  }
  return Math.floor(Math.random() * 0xffffffff);
}
