import { spawn } from 'node:child_process';
import { access, constants, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

export interface ScreenshotOptions {
  /** Default 60 000 ms: a cold Chromium start on a busy machine takes a few seconds. */
  timeoutMs?: number;
  /** Where the reason for a skipped screenshot goes; default console.warn. */
  log?: (message: string) => void;
  width?: number;
  height?: number;
}

const BROWSERS = ['chromium', 'chromium-browser', 'google-chrome'];

/** The Chromium binary: `$CHROMIUM_PATH`, else the first of the usual names on PATH. */
export async function findChromium(): Promise<string | undefined> {
  const explicit = process.env.CHROMIUM_PATH;
  if (explicit) return (await executable(explicit)) ? explicit : undefined;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    for (const name of BROWSERS) {
      const candidate = join(dir, name);
      if (dir && (await executable(candidate))) return candidate;
    }
  }
  return undefined;
}

/**
 * Renders `htmlPath` in headless Chromium and writes a PNG. Resolves false (and logs why) when
 * no Chromium is installed; rejects if Chromium fails, times out or writes no image.
 */
export async function screenshot(
  htmlPath: string,
  pngPath: string,
  options: ScreenshotOptions = {},
): Promise<boolean> {
  const { timeoutMs = 60_000, log = console.warn, width = 1600, height = 1000 } = options;
  const browser = await findChromium();
  if (!browser) {
    log(
      `screenshot skipped: no Chromium found (looked for $CHROMIUM_PATH and ${BROWSERS.join(', ')} on PATH); ` +
        `install it with: apt-get install chromium`,
    );
    return false;
  }
  const profile = await mkdtemp(join(tmpdir(), 'leasehold-chromium-'));
  const output = resolve(pngPath);
  await rm(output, { force: true });
  try {
    await run(
      browser,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--hide-scrollbars',
        '--no-first-run',
        '--no-default-browser-check',
        '--disable-extensions',
        // Nothing to fetch: the page is self-contained, and background fetches only slow it.
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        `--user-data-dir=${profile}`,
        `--screenshot=${output}`,
        `--window-size=${width},${height}`,
        pathToFileURL(resolve(htmlPath)).href,
      ],
      timeoutMs,
    );
    const written = await stat(output).catch(() => undefined);
    if (!written || written.size === 0) {
      throw new Error(`${browser} exited without writing ${output}`);
    }
    return true;
  } finally {
    await rm(profile, { recursive: true, force: true });
  }
}

function run(command: string, args: string[], timeoutMs: number): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    // Its own process group, so a timeout also ends Chromium's helper processes.
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    const timer = setTimeout(() => {
      kill(child.pid);
      reject(
        new Error(
          `${command} did not finish the screenshot within ${timeoutMs} ms; stderr: ${stderr.slice(-800)}`,
        ),
      );
    }, timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`could not start ${command}: ${error.message}`, { cause: error }));
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolvePromise();
      else
        reject(
          new Error(`${command} exited with ${code ?? signal}; stderr: ${stderr.slice(-800)}`),
        );
    });
  });
}

function kill(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

async function executable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
