#!/usr/bin/env bash
# `pnpm test:cluster`: the integration suite against docker-compose.yml's 3-member etcd cluster,
# with all three endpoints in ETCD_ENDPOINTS, as a service that talks to a production cluster
# would see it (tests that stop, pause or kill members still start clusters of their own).
#
# Runs the compose file's etcd services with podman-compose (installed here from Debian if
# missing, with the dnsname plugin that resolves the members' names) on free loopback ports,
# waits for every member to be healthy, runs the tests and removes the cluster again. Needs what
# `bash scripts/setup.sh` installs; PostgreSQL and Redis come from DATABASE_URL / REDIS_URL (the
# machine's own, as for `pnpm test`). Ends with the totals line, like `pnpm test`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DEBIAN_FRONTEND=noninteractive

need=()
for pkg in podman-compose golang-github-containernetworking-plugin-dnsname; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "[cluster] apt-get install ${need[*]}"
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# The Podman socket and the local etcd image (idempotent), for the compose file and the tests.
bash "$ROOT/.ci/setup-podman-etcd.sh" >/dev/null

free_port() {
  node -e "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}
export ETCD1_PORT=$(free_port) ETCD2_PORT=$(free_port) ETCD3_PORT=$(free_port)
PROJECT="leasehold-cluster-$$"
compose() { podman-compose -p "$PROJECT" "$@"; }
cleanup() {
  compose down -v >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "[cluster] starting etcd1..3 on 127.0.0.1:$ETCD1_PORT,$ETCD2_PORT,$ETCD3_PORT"
compose up -d etcd1 etcd2 etcd3 >/dev/null 2>&1
ENDPOINTS="http://127.0.0.1:$ETCD1_PORT,http://127.0.0.1:$ETCD2_PORT,http://127.0.0.1:$ETCD3_PORT"
healthy=false
# A cold start elects a leader within a few election timeouts; 60 s also covers a loaded host.
for _ in $(seq 1 120); do
  if ETCDCTL_API=3 etcdctl --endpoints "$ENDPOINTS" --dial-timeout 1s --command-timeout 2s \
    endpoint health >/dev/null 2>&1; then
    healthy=true
    break
  fi
  sleep 0.5
done
if [ "$healthy" != true ]; then
  echo "[cluster] the cluster did not become healthy within 60 s:" >&2
  ETCDCTL_API=3 etcdctl --endpoints "$ENDPOINTS" endpoint health >&2 || true
  compose logs --tail 20 >&2 || true
  exit 1
fi
ETCDCTL_API=3 etcdctl --endpoints "$ENDPOINTS" member list

export ETCD_ENDPOINTS="$ENDPOINTS"
export DOCKER_HOST=${DOCKER_HOST:-unix:///run/podman/podman.sock}
export TESTCONTAINERS_RYUK_DISABLED=true TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
status=0
pnpm build >/dev/null
node scripts/run-tests.mjs --project integration "$@" || status=$?
exit "$status"
