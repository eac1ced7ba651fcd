/**
 * Splits a byte stream into lines, forwards each to `log`, and keeps the last few so a startup
 * failure can say what etcd printed (e.g. "address already in use") instead of only "timed out".
 */
export class LogTail {
  private readonly lines: string[] = [];
  private partial = '';

  constructor(
    private readonly prefix: string,
    private readonly log: (line: string) => void,
    private readonly keep = 30,
  ) {}

  push(chunk: Buffer | string): void {
    const text = this.partial + chunk.toString();
    const parts = text.split('\n');
    this.partial = parts.pop() ?? '';
    for (const line of parts) this.add(line);
  }

  /** Emits a trailing line that had no newline yet. */
  flush(): void {
    if (this.partial !== '') this.add(this.partial);
    this.partial = '';
  }

  tail(): string[] {
    return [...this.lines];
  }

  /** The kept lines as an indented block for error messages. */
  describe(): string {
    return this.lines.length === 0
      ? `  (${this.prefix} printed nothing)`
      : `last output of ${this.prefix}:\n` + this.lines.map((l) => `  ${l}`).join('\n');
  }

  private add(raw: string): void {
    const line = raw.replace(/\r$/, '');
    if (line === '') return;
    this.lines.push(line);
    if (this.lines.length > this.keep) this.lines.shift();
    try {
      this.log(`[${this.prefix}] ${line}`);
    } catch {
      // A throwing log callback must not break the harness.
    }
  }
}
