/**
 * Process warnings (Node's deprecations, such as DEP0123 from the gRPC layer for an https://<IP>
 * endpoint; the SDK's own) would add lines of Node's format to leasehold's one-line errors.
 * leasehold prints them itself: nothing by default, one line each with `--debug`.
 */

let sink: ((line: string) => void) | undefined;

/** One line for a warning or an error, without its stack. */
export function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ');
}

/** Replaces Node's printing of process warnings by leasehold's (see {@link showWarnings}). */
export function takeOverWarnings(): void {
  process.removeAllListeners('warning');
  process.on('warning', (warning: Error & { code?: string }) => {
    const code = warning.code === undefined ? '' : ` [${warning.code}]`;
    debugLine(`${warning.name}${code}: ${oneLine(warning.message)}`);
  });
}

/** From now on warnings are printed, one line each, to `to` (`--debug`). */
export function showWarnings(to: ((line: string) => void) | undefined): void {
  sink = to;
}

/** Prints `text` as one `leasehold: warning:` line, with `--debug` only. */
export function debugLine(text: string): void {
  sink?.(`leasehold: warning: ${oneLine(text)}`);
}

/** Prints what leasehold is about to do as one `leasehold: debug:` line, with `--debug` only. */
export function debugNote(text: string): void {
  sink?.(`leasehold: debug: ${oneLine(text)}`);
}
