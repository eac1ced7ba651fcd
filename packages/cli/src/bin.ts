#!/usr/bin/env node
// First: warnings emitted while the other modules load are leasehold's to print.
import './take-over-warnings.js';
import { main, writer } from './cli.js';
import { signalExitCode } from './exit-codes.js';

// A reader that went away (`leasehold observe x | head -1`) ends leasehold as SIGPIPE would.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    process.exit(err.code === 'EPIPE' ? signalExitCode('SIGPIPE') : 1);
  });
}

const code = await main(process.argv, { stdout: process.stdout, stderr: process.stderr });
// Everything written is handed to the OS before exit; then exit even if a stray handle (a
// clean-up retry, a socket being torn down) would keep the event loop alive.
await Promise.all([writer(process.stdout)(''), writer(process.stderr)('')]);
process.exit(code);
