/** One line a {@link recordingLogger} kept. */
export interface LoggedLine {
  level: string;
  fields: Record<string, unknown>;
  message: string;
}

/**
 * A pino-shaped logger that keeps its lines; `find` returns the first line whose message equals
 * (or matches) `message` and whose fields include `fields`.
 */
export function recordingLogger() {
  const lines: LoggedLine[] = [];
  const at =
    (level: string) =>
    (fields: object, message = '') =>
      void lines.push({ level, fields: fields as Record<string, unknown>, message });
  const logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  const find = (message: string | RegExp, fields: Record<string, unknown> = {}) =>
    lines.find(
      (l) =>
        (typeof message === 'string' ? l.message === message : message.test(l.message)) &&
        Object.entries(fields).every(([k, v]) => l.fields[k] === v),
    );
  return { lines, logger, find };
}
