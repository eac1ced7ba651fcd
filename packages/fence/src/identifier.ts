import { InvalidArgumentError } from './errors.js';

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
    throw new InvalidArgumentError(
      `invalid ${what} ${typeof name === 'string' ? JSON.stringify(name) : `of type ${typeof name}`}: ` +
        `allowed: ${allowSchema ? 'name or schema.name, each ' : ''}matching ${IDENTIFIER.source}`,
    );
  }
  return parts.map((part) => `"${part}"`).join('.');
}
