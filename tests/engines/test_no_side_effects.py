"""Loading a model through the engines changes nothing process-wide: os.environ stays as it was.

Each case runs in a fresh interpreter with the hub's offline switches unset (the Makefile sets
them for the test run; a user's notebook does not), so a library call that quietly sets one
would show up here. HF_ENDPOINT points at a closed port: a stray hub call fails fast instead
of reaching out. One variable is pinned rather than checked: importing ``torch._dynamo`` (which
transformers' masking code does) writes TORCHINDUCTOR_CACHE_DIR into os.environ, torch's own
doing at import time; given an absolute path, torch leaves it as it is.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engines.servers import free_port

REPO = Path(__file__).resolve().parents[2]
CHILD = """
import json, os, sys
sys.path.insert(0, {repo!r})
before = dict(os.environ)
from ptfactory.engines.base import SamplingParams
from ptfactory.engines.transformers_engine import TransformersEngine
engine = TransformersEngine(model_id="m", model_path={model!r})
hello = [{{"role": "user", "content": "hello"}}]
(reply,) = engine.chat([hello], SamplingParams(max_tokens=3, temperature=0))[0]
(scored,) = engine.score([hello], ["the quick brown fox"])
after = dict(os.environ)
changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
print(json.dumps({{"changed": {{k: [before.get(k), after.get(k)] for k in changed}},
                  "scored": len(scored.tokens)}}))
"""
_OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")


def _environ_change(model: str, home: Path) -> dict[str, list[str | None]]:
    # PTF_MODELS_DIR (the suite's shared conversions) is dropped: the bundled case converts in ``home``
    env = {k: v for k, v in os.environ.items() if k not in (*_OFFLINE, "PTF_MODELS_DIR")}
    env.update(
        PTF_HOME=str(home),
        HF_ENDPOINT=f"http://127.0.0.1:{free_port()}",
        TORCHINDUCTOR_CACHE_DIR=str(home.parent / "torchinductor"),
        OMP_NUM_THREADS="1",
    )
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(repo=str(REPO), model=model)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["scored"] > 0
    changed: dict[str, list[str | None]] = result["changed"]
    return changed


def test_loading_a_model_folder_leaves_the_environment_alone(tiny_model: Path, tmp_path: Path) -> None:
    assert _environ_change(str(tiny_model), tmp_path / "home") == {}


@pytest.mark.slow
def test_converting_the_bundled_model_leaves_the_environment_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"  # an empty PTF_HOME: "bundled" converts the GGUF there, in the child
    assert _environ_change("bundled", home) == {}
    assert (home / "models" / "SmolLM2-135M-Instruct" / "config.json").is_file()
