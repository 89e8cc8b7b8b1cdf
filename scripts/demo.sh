#!/usr/bin/env bash
# make demo's job, after its set-up (make demo-setup): the factory run on the demo seeds, the pull,
# Label Studio up with the review queue pushed, the Dagster UI answering. Prints each step's wall
# time and the total.
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
$ptf run --seeds demo/seeds --config demo/factory.yaml
step "ptf run (the factory)"
$ptf pull sft@latest --to .ptf/pulled/sft-latest --force
step "ptf pull sft@latest"
$ptf annotate up
step "ptf annotate up"
$ptf annotate push
step "ptf annotate push"
scripts/demo-ui.sh
step "the Dagster UI answering"
$ptf datasets list
echo "published: $($ptf datasets list --json | .venv/bin/python -c 'import json,sys; r=json.load(sys.stdin); print(", ".join(d["path"] for d in r) or "nothing")')"
echo "Label Studio: http://127.0.0.1:8080  (login and password: .ptf/annotation/credentials.json)"
printf 'demo: the job took %d s (set-up apart: make demo-setup)\n' $((($(ms) - start) / 1000))
