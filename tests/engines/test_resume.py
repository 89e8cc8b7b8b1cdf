"""kill -9 a generation run half-way, rerun it: no finished request is sent again, same output."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHILD = """
import json, sys
sys.path.insert(0, {repo!r})
from ptfactory.engines.cache import ResponseCache
from ptfactory.engines.transformers_engine import TransformersEngine
from ptfactory.generators.config import SamplingConfig
from ptfactory.generators.responses import generate_responses
from ptfactory.storage.schema import from_records, sample_id
rows = []
for i in range(40):
    messages = [{{"role": "user", "content": f"task number {{i}}: write a python function"}}]
    rows.append({{"sample_id": sample_id("sft", messages), "batch": "b", "kind": "sft", "messages": messages,
                 "provenance": {{"method": "self_instruct", "seed_task_id": str(i)}},
                 "decisions": [{{"stage": "generate", "verdict": "keep", "reason": "x"}}]}})
engine = TransformersEngine(model_id="tiny", model_path={model!r}, cache=ResponseCache({cache!r}),
                            chunk_size=2, batch_size=2)
table, _ = generate_responses(from_records(rows), from_records([]), engine,
                              SamplingConfig(n=2, temperature=1.0, max_tokens=48, seed=3))
out = sorted((r["provenance"]["parent_id"], r["messages"][-1]["content"]) for r in table.to_pylist())
open({out!r}, "w").write(json.dumps(out))
"""


def _start(tmp: Path, model: Path, name: str, log: Path) -> subprocess.Popen[bytes]:
    code = CHILD.format(
        repo=str(REPO), model=str(model), cache=str(tmp / f"{name}.sqlite"), out=str(tmp / f"{name}.json")
    )
    env = {**os.environ, "PTF_ENGINE_CALL_LOG": str(log), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", code], env=env)


def _events(log: Path) -> list[tuple[str, str]]:
    if not log.exists():
        return []
    return [tuple(line.split()) for line in log.read_text().splitlines() if line.strip()]  # type: ignore[misc]


def test_kill_9_then_rerun_resends_nothing_finished(tmp_path: Path, tiny_model: Path) -> None:
    log = tmp_path / "calls.log"
    child = _start(tmp_path, tiny_model, "resumed", log)
    deadline = time.monotonic() + 300
    while sum(1 for e, _ in _events(log) if e == "done") < 10:
        assert child.poll() is None, "the run finished before it could be killed; make it longer"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert not (tmp_path / "resumed.json").exists()
    first = _events(log)
    finished = {k for e, k in first if e == "done"}
    assert 10 <= len(finished) < 40

    rerun = _start(tmp_path, tiny_model, "resumed", log)
    assert rerun.wait(timeout=600) == 0
    second = _events(log)[len(first) :]
    resent = {k for e, k in second if e == "sent"} & finished
    assert resent == set(), f"{len(resent)} finished requests were sent again"
    assert {k for e, k in first + second if e == "done"} == finished | {k for e, k in second if e == "done"}
    assert len({k for e, k in first + second if e == "done"}) == 40

    clean_log = tmp_path / "clean.log"
    clean = _start(tmp_path, tiny_model, "clean", clean_log)
    assert clean.wait(timeout=600) == 0
    assert json.loads((tmp_path / "resumed.json").read_text()) == json.loads(
        (tmp_path / "clean.json").read_text()
    )
