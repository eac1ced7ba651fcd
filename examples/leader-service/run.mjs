// Starts three replicas of replica.mjs (a, b and c on ports 8081, 8082 and 8083) and stops them
// together on Ctrl-C or SIGTERM. Stop one with `kill <pid>` (each prints its pid) and watch
// another take over. Exits 0 if every replica stepped down cleanly.
//
//   ETCD_ENDPOINTS=http://127.0.0.1:2379 PORTS=8081,8082,8083 node examples/leader-service/run.mjs
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const replica = fileURLToPath(new URL('./replica.mjs', import.meta.url));
const ports = (process.env.PORTS ?? '8081,8082,8083').split(',');

const replicas = ['a', 'b', 'c'].map((name, i) => {
  const child = spawn(process.execPath, [replica, name, ports[i] ?? String(8081 + i)], {
    stdio: 'inherit',
  });
  child.on('exit', (code, signal) => {
    console.log(`[run] ${name} exited with ${signal ?? `code ${code}`}`);
    if (code !== 0) process.exitCode = 1;
  });
  return child;
});

// A replica that has already exited is skipped: kill() sends nothing once a child is gone.
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => replicas.forEach((child) => child.kill('SIGTERM')));
}
