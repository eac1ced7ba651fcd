#!/usr/bin/env bash
# One-time set-up of a fresh Debian 12 machine (as root) for leasehold development:
# pinned pnpm, etcd (server + etcdctl) and Podman from Debian, the local etcd image and Podman's
# Docker-compatible socket for container tests, and the workspace's dependencies. Idempotent.
#
#   bash scripts/setup.sh && pnpm demo
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export DEBIAN_FRONTEND=noninteractive

apt_install() {
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$@" >/dev/null
}
need=()
# chromium + a font: the fault suite screenshots its HTML timeline headlessly.
for pkg in podman runc etcd-server etcd-client busybox-static curl ca-certificates chromium fonts-dejavu-core; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "[setup] apt-get install ${need[*]}"
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt_install "${need[@]}"
fi

PNPM_VERSION=12.4.2
if [ "$(pnpm --version 2>/dev/null || true)" != "$PNPM_VERSION" ]; then
  echo "[setup] npm i -g pnpm@$PNPM_VERSION"
  npm i -g -E "pnpm@$PNPM_VERSION" --no-audit --no-fund >/dev/null
fi

# Container tests: a Podman socket and an etcd image built from Debian's binary (no registry).
bash "$ROOT/.ci/setup-podman-etcd.sh"

# better-sqlite3 compiles its addon against the installed Node's headers.
echo "[setup] pnpm install"
npm_config_nodedir=/usr pnpm install --frozen-lockfile
echo "[setup] done: 'pnpm demo' runs the demo, 'pnpm test' runs every test"
