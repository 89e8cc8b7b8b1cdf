#!/usr/bin/env bash
# Start the Dagster UI for the demo in the background (its own process group), unless one answers.
# Stop it with: kill $(cat .ptf/ui.pid)  (one SIGTERM to ptf ui stops all of dagster dev)
set -euo pipefail
cd "$(dirname "$0")/.."
port=${PTF_UI_PORT:-3000}
if ! curl -sf "http://127.0.0.1:$port/server_info" >/dev/null 2>&1; then
  setsid nohup .venv/bin/ptf ui --port "$port" >.ptf/ui.log 2>&1 </dev/null &
  echo $! >.ptf/ui.pid
  for _ in $(seq 1 240); do
    curl -sf "http://127.0.0.1:$port/server_info" >/dev/null 2>&1 && break
    sleep 0.5
  done
  curl -sf "http://127.0.0.1:$port/server_info" >/dev/null || { echo "the Dagster UI did not start; see .ptf/ui.log" >&2; exit 1; }
fi
echo "Dagster UI:   http://127.0.0.1:$port  (stop: kill \$(cat .ptf/ui.pid))"
