/**
 * The `leasehold` command as a module, for tools that embed it or want its exit codes by name.
 */
export { main, type Io } from './cli.js';
export { exitCodes, signalExitCode } from './exit-codes.js';
