import { now } from './stats.mjs';

/**
 * The watch floor's far side: an etcd3 watch on `prefix` that stamps when each key's put and
 * delete arrive; `seenPut(key)` / `seenDelete(key)` resolve with those times.
 */
export async function floorWatch(raw, prefix) {
  const puts = new Map();
  const deletes = new Map();
  const seen = (map, key) => {
    const entry = map.get(key);
    if (typeof entry === 'number') {
      map.delete(key);
      return entry;
    }
    return new Promise((resolve) => map.set(key, [...(entry ?? []), resolve]));
  };
  const arrived = (map, key, at) => {
    const entry = map.get(key);
    if (Array.isArray(entry)) {
      map.delete(key);
      for (const resolve of entry) resolve(at);
    } else map.set(key, at);
  };
  const watcher = await raw.watch().prefix(prefix).create();
  watcher.on('put', (kv) => arrived(puts, kv.key.toString(), now()));
  watcher.on('delete', (kv) => arrived(deletes, kv.key.toString(), now()));
  return {
    seenPut: ({ key }) => seen(puts, key),
    seenDelete: ({ key }) => seen(deletes, key),
    close: () => watcher.cancel(),
  };
}

/**
 * The requests every worker that hosts a floor watch answers: `seenPut`, `seenDelete`, and a
 * `close` that ends the watch, the worker's client (`init` resolves with `{ client, floor }`)
 * and its raw etcd3 connection.
 */
export function floorHandlers(init, raw) {
  return {
    seenPut: async (args) => (await init).floor.seenPut(args),
    seenDelete: async (args) => (await init).floor.seenDelete(args),
    close: async () => {
      const { client, floor } = await init;
      await floor.close();
      await client.close();
      raw.close();
    },
  };
}
