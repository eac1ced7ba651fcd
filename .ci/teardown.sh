#!/usr/bin/env bash
# Removes what a CI run started: etcd containers and the Podman API service (only if this run
# started it). Safe to run more than once and when nothing was started. Never fails the build.
set -u
STATE_DIR=${LEASEHOLD_CI_STATE:-$(cd "$(dirname "$0")/.." && pwd)/.tmp/ci}

if command -v podman >/dev/null 2>&1; then
  # testcontainers labels every container org.testcontainers=true (Ryuk, its own reaper, is off).
  # With LEASEHOLD_TEST_RUN_ID set, only this run's containers go: on a shared machine other
  # runs' containers must survive. Filters on two labels must both match.
  filters=(--filter label=org.testcontainers=true)
  if [ -n "${LEASEHOLD_TEST_RUN_ID:-}" ]; then
    filters+=(--filter "label=io.leasehold.testing.run=${LEASEHOLD_TEST_RUN_ID}")
  fi
  ids=$(podman ps -aq "${filters[@]}" 2>/dev/null || true)
  if [ -n "$ids" ]; then
    # shellcheck disable=SC2086 # one id per word
    podman rm -f -t 2 $ids >/dev/null 2>&1 || true
    echo "teardown: removed $(echo "$ids" | wc -w) container(s)"
  fi
  # Members' data volumes (restorable clusters keep their data in named volumes), same labels.
  vols=$(podman volume ls -q "${filters[@]}" 2>/dev/null || true)
  if [ -n "$vols" ]; then
    # shellcheck disable=SC2086 # one name per word
    podman volume rm -f $vols >/dev/null 2>&1 || true
    echo "teardown: removed $(echo "$vols" | wc -w) volume(s)"
  fi
fi

# The Podman service, only when setup-podman-etcd.sh started it for this run (pid recorded).
pidfile="$STATE_DIR/podman-service.pid"
if [ -f "$pidfile" ]; then
  pid=$(cat "$pidfile")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    echo "teardown: stopped podman service (pid $pid)"
  fi
  rm -f "$pidfile"
fi
exit 0
