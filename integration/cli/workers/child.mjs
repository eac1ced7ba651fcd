// The command that `leasehold run` / `elect` runs in these tests. It reports to the test's probe
// server over TCP, one JSON line per event: its start (with the token and key it was handed),
// every signal it receives, and its end. The test sees the socket close when the process dies,
// however it dies (SIGKILL included).
//
// Env: PROBE_PORT, CHILD_NAME; DIE_ON (comma-separated signals that end it, by default
// SIGINT,SIGTERM,SIGHUP; others are only reported); STOP_DELAY_MS (after such a signal it takes
// this long to clean up before it ends: a slow shutdown); EXIT_AFTER_MS and EXIT_CODE (end by
// itself).
// The probe may send {"cmd":"exit","code":N}.
import { connect } from 'node:net';
import { createInterface } from 'node:readline';

const now = () => performance.timeOrigin + performance.now();
const name = process.env.CHILD_NAME ?? 'child';
const dieOn = new Set((process.env.DIE_ON ?? 'SIGINT,SIGTERM,SIGHUP').split(',').filter(Boolean));
const stopDelayMs = Number(process.env.STOP_DELAY_MS ?? 0);
const socket = connect(Number(process.env.PROBE_PORT), '127.0.0.1');
socket.setNoDelay(true);
const send = (message, then) =>
  socket.write(`${JSON.stringify({ name, pid: process.pid, at: now(), ...message })}\n`, then);

send({
  event: 'start',
  token: process.env.LEASEHOLD_TOKEN,
  key: process.env.LEASEHOLD_LOCK_KEY ?? process.env.LEASEHOLD_ELECTION_KEY,
  leaseId: process.env.LEASEHOLD_LEASE_ID,
  slot: process.env.LEASEHOLD_SLOT,
});

function end(code) {
  send({ event: 'end', code }, () => process.exit(code));
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    send({ event: 'signal', signal }, () => {
      if (!dieOn.has(signal)) return;
      setTimeout(() => {
        send({ event: 'end', signal }, () => {
          process.removeAllListeners(signal);
          process.kill(process.pid, signal); // die by it, so leasehold sees 128+N
        });
      }, stopDelayMs);
    });
  });
}

createInterface({ input: socket }).on('line', (line) => {
  const message = JSON.parse(line);
  if (message.cmd === 'exit') end(message.code ?? 0);
});

if (process.env.EXIT_AFTER_MS) {
  setTimeout(() => end(Number(process.env.EXIT_CODE ?? 0)), Number(process.env.EXIT_AFTER_MS));
}
