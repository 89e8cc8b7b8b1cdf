"""Dagster concurrency pools: what one step holds that two steps (of any runs) must not hold at once.

dagster.yaml gives every pool one slot (``concurrency.pools.default_limit``), across runs:

- ``gpu``: the steps that load an LLM engine (generation, the student's difficulty attempts, the
  judge panel, agent rollouts). One at a time, so two runs never load two models onto one GPU,
  or two CPU models onto the same cores. Difficulty also runs the student's code in the sandbox;
  its engine is what must not be doubled, so it waits on ``gpu``.
- ``sandbox``: execution validation, which fills the sandbox pool (``sandbox.workers`` containers).

A step has one pool; ``ptf run`` frees the slots of a run that was killed (pipelines/runner.py).
"""

GPU_POOL = "gpu"
SANDBOX_POOL = "sandbox"
