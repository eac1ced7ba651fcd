import type { Logger } from './logger.js';

/** One line a {@link recordingLogger} kept. */
export interface LoggedLine {
  level: string;
  fields: Record<string, unknown>;
  message: string;
}

/** A pino-shaped logger that keeps its lines, for tests. */
export function recordingLogger(): { lines: LoggedLine[]; logger: Logger } {
  const lines: LoggedLine[] = [];
  const at =
    (level: string) =>
    (fields: object, message = ''): void =>
      void lines.push({ level, fields: fields as Record<string, unknown>, message });
  const logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  return { lines, logger };
}
