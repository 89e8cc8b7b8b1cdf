#!/usr/bin/env bash
# System services the tests and the demo use, on a fresh Debian machine (as root). Idempotent:
# installs only what is missing, starts dockerd only if no engine answers, reuses the image.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .ptf

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v bwrap >/dev/null || need+=(bubblewrap)
# pip builds pycosat (reasoning-gym's) from source at install time: a C compiler then, none at run time
command -v cc >/dev/null || need+=(gcc)
# PTF_SETUP_FOR=demo (make demo): only what the demo runs; the rest is for the tests
if [ "${PTF_SETUP_FOR:-test}" != demo ]; then
  command -v chromium >/dev/null || need+=(chromium)  # browser tests (Playwright drives it; no browser download)
  # the Dagster-instance tests start their own server with initdb/pg_ctl (Debian keeps them off PATH)
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null || need+=(postgresql)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${need[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "${need[@]}" >/dev/null; }
fi

# A machine restored from a snapshot can carry a dead daemon's pid files, whose pids now belong to
# other processes; dockerd then refuses to start. Drop any pid file not held by a docker process.
clear_stale_pidfile() {
  local f=$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f" 2>/dev/null || true)
  if [ -z "$pid" ] || ! grep -qE 'dockerd|containerd' "/proc/$pid/cmdline" 2>/dev/null; then
    rm -f "$f"
  fi
}

start_dockerd() {
  clear_stale_pidfile /var/run/docker.pid
  clear_stale_pidfile /var/run/docker/containerd/containerd.pid
  echo "starting dockerd $* (log: .ptf/dockerd.log)"
  setsid nohup dockerd "$@" >>.ptf/dockerd.log 2>&1 </dev/null &
  for _ in $(seq 1 120); do docker info >/dev/null 2>&1 && return 0; sleep 0.5; done
  echo "dockerd $* did not answer within 60 s; the end of its log:" >&2
  tail -n 15 .ptf/dockerd.log >&2
  pkill -x dockerd 2>/dev/null || true
  sleep 2
  return 1
}

if ! docker info >/dev/null 2>&1; then
  # The sandbox only runs containers with --network none, so a daemon without iptables or the
  # default bridge (kernels without nf_tables) or on the vfs driver (no overlayfs) serves it too.
  start_dockerd \
    || start_dockerd --iptables=false --ip6tables=false --bridge=none \
    || start_dockerd --iptables=false --ip6tables=false --bridge=none --storage-driver=vfs \
    || { echo "dockerd did not start; see .ptf/dockerd.log" >&2; exit 1; }
fi

.venv/bin/ptf sandbox build
