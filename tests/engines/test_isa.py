"""Reproducible decisions across CPUs (issue 40, item 3): the default engine gives the same scores,
within ``EPSILON``, and the same keep/drop decisions on the AVX2 code paths as on the CPU's widest
(AVX-512, AVX10.1 or AMX, as the CPU has them), on the bundled SmolLM2.

The narrower paths are forced in a fresh interpreter, each switch proven to have taken effect:
ATen's kernels (``ATEN_CPU_CAPABILITY``: ``torch.backends.cpu.get_cpu_capability()`` reports it),
oneDNN's (``ONEDNN_MAX_CPU_ISA``: its verbose ``isa:`` line; torch's float32 products do not run
on oneDNN here, but a build or an op that does gets the narrow path too) and MKL's (``MKL_ENABLE_INSTRUCTIONS``:
MKL names the instruction set it runs in its verbose header on Intel CPUs; on AMD ones it names
none and takes the same code path whatever the setting, so its products are the same there).
Both runs use one thread: a thread count changes the order of a product's sums as an ISA does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.engine_runners import ROWS
from ptfactory.filters.difficulty import DifficultyConfig

REPO = Path(__file__).resolve().parents[2]
EPSILON = 1e-4  # nats, per token log-probability; measured: see test output and docs/engines.md
WIDER = ("AVX-512", "AVX512", "AVX10", "AMX")  # how oneDNN's isa line names paths past AVX2
FORCED = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
CHILD = """
import json, math, sys
sys.path.insert(0, {repo!r})
import torch
from bench.engine_runners import ROWS
from ptfactory.engines.transformers_engine import TransformersEngine

a, w = torch.randn(8, 64), torch.randn(16, 64)
with torch.backends.mkl.verbose(torch.backends.mkl.VERBOSE_ON):
    torch.nn.functional.linear(a, w)  # MKL's header names the ISA it runs (on Intel)
from torch.utils import mkldnn
with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):  # oneDNN's isa line
    mkldnn.to_mkldnn(torch.nn.Conv2d(8, 8, 3))(torch.randn(1, 8, 16, 16).to_mkldnn())
engine = TransformersEngine(model_id="m", model_path={model!r}, threads=1, streams=1)
answers = [a for _, a in ROWS]
cond = engine.score([[{{"role": "user", "content": q}}] for q, _ in ROWS], answers)
free = engine.score([[] for _ in ROWS], answers)
votes = engine.choice_logprobs([[{{"role": "user", "content": "Rate this answer from 1 to 5: " + a}}] for a in answers], list("12345"))
print("RESULT " + json.dumps({{
    "capability": torch.backends.cpu.get_cpu_capability(),
    "logprobs": [c.logprobs + f.logprobs for c, f in zip(cond, free)],
    "ifd": [math.exp(c.mean_nll - f.mean_nll) for c, f in zip(cond, free)],
    "votes": votes,
}}))
"""


def _run(model: Path, forced: bool) -> tuple[dict[str, Any], str]:
    env = {k: v for k, v in os.environ.items() if k not in FORCED}
    env.update(OMP_NUM_THREADS="1", **(FORCED if forced else {}))
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(repo=str(REPO), model=str(model))],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    return json.loads(line.removeprefix("RESULT ")), done.stdout + done.stderr


def _isa_line(log: str, marker: str) -> str:
    return next((x for x in log.splitlines() if marker in x), "")


@pytest.mark.slow
def test_avx2_paths_give_the_same_scores_and_decisions(smollm2: Path) -> None:
    wide, wide_log = _run(smollm2, forced=False)
    narrow, narrow_log = _run(smollm2, forced=True)
    # each switch took effect
    assert narrow["capability"] == "AVX2"
    onednn = _isa_line(narrow_log, "isa:")
    assert "AVX2" in onednn and "AVX-512" not in onednn and "AVX512" not in onednn, onednn
    mkl = _isa_line(narrow_log, "MKL_VERBOSE") + _isa_line(narrow_log, "oneMKL")
    assert mkl and "AVX-512" not in mkl and "AVX512" not in mkl, mkl
    if wide["capability"] != "AVX2":  # this CPU has wider paths: the forced run did move off them
        widest = _isa_line(wide_log, "isa:")  # oneDNN names AVX-512 on older CPUs, AVX10.1 on newer
        assert widest != onednn and any(w in widest for w in WIDER), widest
    # the same numbers within epsilon
    gaps = [
        abs(x - y)
        for a, b in zip(wide["logprobs"], narrow["logprobs"], strict=True)
        for x, y in zip(a, b, strict=True)
    ]
    print(f"largest log-probability gap between ISAs: {max(gaps):.2e} over {len(gaps)} tokens")
    assert len(gaps) > 300 and max(gaps) < EPSILON
    vote_gaps = [
        abs(x - y)
        for a, b in zip(wide["votes"], narrow["votes"], strict=True)
        for x, y in zip(a, b, strict=True)
    ]
    assert max(vote_gaps) < EPSILON
    # the same decisions: the difficulty gate's IFD band, any threshold between the rows' values
    # (the same order of every row), and each judge vote's top score
    config = DifficultyConfig()

    def kept(values: list[float]) -> list[bool]:
        return [config.ifd_min <= v < config.ifd_max for v in values]

    assert kept(wide["ifd"]) == kept(narrow["ifd"])
    order = sorted(range(len(ROWS)), key=wide["ifd"].__getitem__)
    assert order == sorted(range(len(ROWS)), key=narrow["ifd"].__getitem__)
    top = [max(range(5), key=row.__getitem__) for row in wide["votes"]]
    assert top == [max(range(5), key=row.__getitem__) for row in narrow["votes"]]
