#!/usr/bin/env bash
# make demo's job, after its set-up (make demo-setup): the factory run on the demo seeds, the pull,
# Label Studio up with the review queue pushed, the Dagster UI answering. Prints each step's wall
# time (a step run beside another: the time it added after that one) and the total.
set -euo pipefail
cd "$(dirname "$0")/.."
ptf=.venv/bin/ptf
ms() { date +%s%3N; }
start=$(ms)
last=$start
step() {
  local now
  now=$(ms)
  printf 'demo: %-34s %5d.%d s\n' "$1" $(((now - last) / 1000)) $(((now - last) % 1000 / 100))
  last=$now
}
mkdir -p .ptf/annotation
# Label Studio boots while the factory runs (the run keeps a core's share idle waiting on the
# sandbox and between stages): its start is mostly waiting on its server, and it touches nothing
# the run writes. The Dagster UI does not start early: its daemon's label sensor would push the
# review queue while `ptf annotate push` does.
$ptf annotate up >.ptf/annotation/demo-up.log 2>&1 &
up=$!
status=0
$ptf run --seeds demo/seeds --config demo/factory.yaml || status=$?
if [ "$status" -ne 0 ]; then
  wait $up || true
  exit "$status" # ptf run's own code (3: the budget stopped it)
fi
step "ptf run (the factory)"
# the pull reads the published version alone: it runs beside the push. sft when the run published
# one; with no row auto-accepted (every sft row waits for review) the first kind it did publish.
kind=$($ptf datasets list --json | .venv/bin/python -c '
import json, sys
kinds = [d["dataset"] for d in json.load(sys.stdin)]
print("sft" if "sft" in kinds else (kinds[0] if kinds else ""))')
if [ -z "$kind" ]; then
  echo "demo: the run published no version (see the run summary above)" >&2
  exit 1
fi
$ptf pull "$kind@latest" --to ".ptf/pulled/$kind-latest" --force >.ptf/pulled-demo.log 2>&1 &
pulled=$!
if ! wait $up; then
  cat .ptf/annotation/demo-up.log >&2
  exit 1
fi
cat .ptf/annotation/demo-up.log
step "ptf annotate up (beside the run)"
$ptf annotate push
step "ptf annotate push"
if ! wait $pulled; then
  cat .ptf/pulled-demo.log >&2
  exit 1
fi
cat .ptf/pulled-demo.log
step "ptf pull $kind@latest (beside push)"
scripts/demo-ui.sh
step "the Dagster UI answering"
$ptf datasets list
echo "published: $($ptf datasets list --json | .venv/bin/python -c 'import json,sys; r=json.load(sys.stdin); print(", ".join(d["path"] for d in r) or "nothing")')"
echo "Label Studio: http://127.0.0.1:8080  (login and password: .ptf/annotation/credentials.json)"
printf 'demo: the job took %d s (set-up apart: make demo-setup)\n' $((($(ms) - start) / 1000))
