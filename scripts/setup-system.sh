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
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${need[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "${need[@]}" >/dev/null; }
fi

if ! docker info >/dev/null 2>&1; then
  echo "starting dockerd (log: .ptf/dockerd.log)"
  setsid nohup dockerd >.ptf/dockerd.log 2>&1 </dev/null &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { echo "dockerd did not start; see .ptf/dockerd.log" >&2; exit 1; }
fi

.venv/bin/ptf sandbox build
