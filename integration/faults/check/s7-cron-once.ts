import type { CheckContext } from './context.js';
import { compareTokens } from './model.js';
import type { Violation } from './types.js';

/**
 * S7: each cron fire runs at most once. Judged twice: by the replicas' beliefs (every claim a
 * replica reported and every run it started, by fire: one token per fire), and by the fenced
 * row (the writes each resource accepted, by the fire of their token: one token per fire). Two
 * tokens for one fire means two claim transactions both won it.
 */
export function checkCronOnce(context: CheckContext): Violation[] {
  const violations: Violation[] = [];
  // fire → token → first process that claimed or ran it with that token
  const byFire = new Map<string, Map<string, { process: string; at: number }>>();
  const fireOfToken = new Map<string, string>();
  const note = (name: string, fireMs: number, token: string, process: string, at: number) => {
    const fire = `${name}@${new Date(fireMs).toISOString()}`;
    fireOfToken.set(token, fire);
    let tokens = byFire.get(fire);
    if (!tokens) byFire.set(fire, (tokens = new Map<string, { process: string; at: number }>()));
    if (!tokens.has(token)) tokens.set(token, { process, at });
  };
  for (const hold of context.model.holds) {
    if (hold.kind === 'cron' && hold.fireMs !== undefined) {
      note(hold.name, hold.fireMs, hold.token, hold.process, hold.start);
    }
  }
  for (const line of context.model.cronEvents) {
    if (line.op !== 'cron-claim' || line.token === undefined || line.fireTime === undefined)
      continue;
    note(String(line.name ?? ''), Date.parse(line.fireTime), line.token, line.process, line.at);
  }
  for (const [fire, tokens] of byFire) {
    if (tokens.size < 2) continue;
    const all = [...tokens.entries()].sort(([a], [b]) => compareTokens(a, b));
    const second = all[1]![1];
    violations.push({
      rule: 'S7',
      kind: 'beliefs',
      at: second.at,
      process: second.process,
      token: all[1]![0],
      message: `cron fire ${fire} was claimed ${tokens.size} times: ${all.map(([t, c]) => `token ${t} by ${c.process}`).join(', ')}`,
    });
  }
  for (const [resource, entries] of Object.entries(context.logs)) {
    const tokensOf = new Map<string, Set<string>>();
    for (const entry of entries) {
      const fire = fireOfToken.get(entry.token);
      if (!fire || !fire.startsWith(`${entry.name}@`)) continue;
      let tokens = tokensOf.get(fire);
      if (!tokens) tokensOf.set(fire, (tokens = new Set()));
      tokens.add(entry.token);
    }
    for (const [fire, tokens] of tokensOf) {
      if (tokens.size < 2) continue;
      violations.push({
        rule: 'S7',
        kind: 'fenced-row',
        resource,
        token: [...tokens].sort(compareTokens)[1],
        message: `${resource} accepted writes of cron fire ${fire} under ${tokens.size} tokens (${[...tokens].sort(compareTokens).join(', ')}): the fire ran more than once`,
      });
    }
  }
  return violations;
}
