/**
 * Refusing misspelt options, in core's wording. The harness runs without `@leasehold/core`
 * installed (an optional peer), so it keeps this small copy; `known-keys.test.ts` pins the
 * wording to core's.
 */

/** A value's kind, never its content: a misspelt option may hold a password. */
export const kindOf = (value: unknown): string =>
  value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;

/**
 * The message for the first key of `value` that `allowed` does not list, if any: a misspelt
 * option (`membrs`) must not silently fall back to its default.
 */
export function unknownKey(
  name: string,
  value: object,
  allowed: readonly string[],
): string | undefined {
  const key = Object.keys(value).find((k) => !allowed.includes(k));
  if (key === undefined) return undefined;
  const kind = kindOf((value as Record<string, unknown>)[key]);
  return `${name}.${key} must be left out (not an option; allowed: ${allowed.join(', ')}), got ${kind}`;
}
