#!/usr/bin/env bash
# Provision Podman and a registry-free etcd image for testcontainers on Debian 12 (root).
# Idempotent: safe to run again; it rebuilds nothing that already exists.
# Recipe and the reasons behind each setting: /work/shared/reference/containers.md.
set -euo pipefail

WORK=${WORK:-/tmp/leasehold-ci/etcd-image}
IMAGE=${IMAGE:-localhost/etcd:3.4}
# The SDK's default image name; tagging the local build with it means tests never pull.
UPSTREAM_TAG=${UPSTREAM_TAG:-quay.io/coreos/etcd:v3.4.23}
SOCK=${SOCK:-/run/podman/podman.sock}
# Per-checkout state (.tmp is git-ignored): teardown stops the service only if this run started it.
STATE_DIR=${LEASEHOLD_CI_STATE:-$(cd "$(dirname "$0")/.." && pwd)/.tmp/ci}
PIDFILE=$STATE_DIR/podman-service.pid
LOGFILE=$STATE_DIR/podman-service.log
mkdir -p "$STATE_DIR"

# 1. Packages. podman brings conmon/netavark; runc because crun rejects this host's hybrid
#    cgroups; etcd-server for the binary inside the image; busybox-static gives the image a shell.
need=()
for pkg in podman runc etcd-server busybox-static curl; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${need[@]}" >/dev/null
fi

# 2. Engine config. Without CAP_SYS_RESOURCE podman cannot raise RLIMIT_NOFILE/NPROC to its
#    default 1048576, so pin both to what this host allows (both are needed: a partial list
#    falls back to 1048576 for the missing one). Podman caps its own NPROC at 32768.
NOFILE=$(ulimit -Hn)
NPROC=$(ulimit -Hu)
if [ "$NPROC" = unlimited ] || [ "$NPROC" -gt 32768 ]; then NPROC=32768; fi
if [ "$NOFILE" = unlimited ]; then NOFILE=1048576; fi
mkdir -p /etc/containers
cat >/etc/containers/containers.conf <<CONF
[containers]
# podman's default RLIMIT_NOFILE/NPROC (1048576) can't be set without CAP_SYS_RESOURCE
default_ulimits = ["nofile=${NOFILE}:${NOFILE}", "nproc=${NPROC}:${NPROC}"]

[engine]
# crun 1.8.1: "cgroups in hybrid mode not supported, drop all controllers from cgroupv2"
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF

# 3. etcd image from Debian's binary: no registry involved. NO EXPOSE: podman reports
#    unpublished EXPOSEd ports as PortBindings {"2380/tcp": null} and testcontainers then waits
#    forever for them to be bound.
if ! podman image exists "$IMAGE"; then
  rm -rf "$WORK"
  mkdir -p "$WORK"/rootfs/{tmp,etc,bin,lib/x86_64-linux-gnu,lib64,var/lib/etcd,usr/local/bin}
  R="$WORK/rootfs"
  chmod 1777 "$R/tmp"
  cp /usr/bin/etcd /usr/bin/etcdctl "$R/usr/local/bin/" # same paths as the upstream images
  ln -s usr/local/bin/etcd "$R/etcd"
  # Debian's etcd/etcdctl link against glibc only.
  cp -L /lib/x86_64-linux-gnu/libc.so.6 "$R/lib/x86_64-linux-gnu/"
  cp -L /lib64/ld-linux-x86-64.so.2 "$R/lib64/"
  cp /bin/busybox "$R/bin/busybox"
  for a in $(/bin/busybox --list); do [ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"; done
  echo 'root:x:0:0:root:/:/bin/sh' >"$R/etc/passwd"
  echo 'root:x:0:' >"$R/etc/group"
  echo 'hosts: files dns' >"$R/etc/nsswitch.conf"
  tar --numeric-owner --owner=0 --group=0 -C "$R" -cf "$WORK/etcd-rootfs.tar" .
  podman import -q --change 'ENV PATH=/usr/local/bin:/bin' --change 'CMD ["/usr/local/bin/etcd"]' \
    --change 'WORKDIR /' "$WORK/etcd-rootfs.tar" "$IMAGE" >/dev/null
  rm -rf "$WORK"
fi
podman image exists "$UPSTREAM_TAG" || podman tag "$IMAGE" "$UPSTREAM_TAG"

# 4. Docker-compatible API socket, in the background (no systemd here); pid recorded for teardown.
mkdir -p "$(dirname "$SOCK")"
if ! curl -fsS --max-time 2 --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1; then
  rm -f "$SOCK"
  nohup podman system service --time=0 "unix://$SOCK" >"$LOGFILE" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 100); do
    curl -fsS --max-time 2 --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1 && break
    sleep 0.1
  done
fi
if ! curl -fsS --max-time 2 --unix-socket "$SOCK" http://d/_ping >/dev/null; then
  echo "podman service did not answer on $SOCK; log:" >&2
  cat "$LOGFILE" >&2 || true
  exit 1
fi
echo "ready: DOCKER_HOST=unix://$SOCK image=$IMAGE tag=$UPSTREAM_TAG"
