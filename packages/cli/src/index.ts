/**
 * The `leasehold` command as a module, for tools that embed it or want its exit codes by name.
 *
 * @example
 * ```ts
 * import { main } from '@leasehold/cli';
 *
 * const code = await main(process.argv, { stdout: process.stdout, stderr: process.stderr });
 * process.exitCode = code;
 * ```
 *
 * @module @leasehold/cli
 */
export { main, type Io } from './cli.js';
export { exitCodes, signalExitCode } from './exit-codes.js';
