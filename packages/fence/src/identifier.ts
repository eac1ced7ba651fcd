import { invalid } from './errors.js';

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Validates and double-quotes a SQL identifier (PostgreSQL and SQLite quote alike). `schema.table`
 * is accepted for tables. Identifiers are the only caller input that ever becomes SQL text:
 * values, and tokens above all, always travel as bound parameters.
 */
export function quoteIdentifier(name: unknown, what: string, allowSchema = false): string {
  const parts = typeof name === 'string' ? name.split('.') : [];
  const ok =
    parts.length >= 1 &&
    parts.length <= (allowSchema ? 2 : 1) &&
    parts.every((part) => IDENTIFIER.test(part));
  if (!ok) {
    throw invalid(
      what,
      `${allowSchema ? 'name or schema.name, each' : 'a name'} matching ${IDENTIFIER.source}`,
      name,
    );
  }
  return parts.map((part) => `"${part}"`).join('.');
}
