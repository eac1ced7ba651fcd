// Starts three replicas of replica.mjs (a, b and c) and stops them together on Ctrl-C or
// SIGTERM. Each fire of the job runs on exactly one of them: watch the "ran" lines. Stop one with
// `kill <pid>` (each prints its pid) and the others go on. Exits 0 if every replica stopped
// cleanly.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test ETCD_ENDPOINTS=http://127.0.0.1:2379 \
//   node examples/cron-replicas/run.mjs
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const replica = fileURLToPath(new URL('./replica.mjs', import.meta.url));

const replicas = ['a', 'b', 'c'].map((name) => {
  const child = spawn(process.execPath, [replica, name], { stdio: 'inherit' });
  child.on('exit', (code, signal) => {
    console.log(`[run] ${name} exited with ${signal ?? `code ${code}`}`);
    if (code !== 0) process.exitCode = 1;
  });
  return child;
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => replicas.forEach((child) => child.kill('SIGTERM')));
}
