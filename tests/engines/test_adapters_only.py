"""engines/ holds adapters only (issue 40, item 1): generation and scoring through the default engine
leave every module's ``forward`` its class's, start no compiler and write no shared library; the
package ships no compiled source, assigns no library module's ``forward`` and subclasses no private
class of torch or transformers."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENGINES = REPO / "engines"
COMPILERS = ("cc", "gcc", "g++", "c++", "clang", "clang++", "ld", "as", "nvcc")
CHILD = """
import gc, json, sys
sys.path.insert(0, {repo!r})
import torch
from ptfactory.engines.base import SamplingParams
from ptfactory.engines.spec import EngineSpec, build_engine

engine = build_engine(EngineSpec(model={model!r}, threads=2), None)
hello = [{{"role": "user", "content": "What is the capital of France?"}}]
engine.chat([hello] * 3, SamplingParams(max_tokens=8, temperature=0))
engine.chat([hello] * 3, SamplingParams(n=2, max_tokens=8, temperature=0.7, top_p=0.9, seed=1))
engine.chat([hello], SamplingParams(max_tokens=16, json_schema={{"type": "object", "properties": {{"a": {{"type": "integer"}}}}}}))
engine.score([hello, []], ["Paris.", "Paris."])
engine.choice_logprobs([hello], ["1", "2"])
patched = sorted({{
    f"{{type(m).__module__}}.{{type(m).__name__}}"
    for m in gc.get_objects()
    if isinstance(m, torch.nn.Module) and "forward" in vars(m)  # an instance's own forward
}})
print("RESULT " + json.dumps({{"backend": engine.backend, "patched": patched}}))
"""


@pytest.mark.slow
def test_generation_and_scoring_patch_nothing_and_compile_nothing(smollm2: Path, tmp_path: Path) -> None:
    """On the bundled SmolLM2 (the model the removed runtime compiled its kernels for), with every
    compiler on PATH replaced by one that logs its call, and caches and temp files in fresh folders."""
    shims = tmp_path / "bin"
    shims.mkdir()
    calls = tmp_path / "compiler-calls"
    for name in COMPILERS:
        shim = shims / name
        shim.write_text(f'#!/bin/sh\necho {name} "$@" >> {calls}\nexit 1\n')
        shim.chmod(0o755)
    fresh = tmp_path / "fresh"
    env = {
        **os.environ,
        "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
        "CC": str(shims / "cc"),
        "CXX": str(shims / "c++"),
        "HOME": str(fresh / "home"),
        "XDG_CACHE_HOME": str(fresh / "cache"),
        "TMPDIR": str(fresh / "tmp"),
        "TORCHINDUCTOR_CACHE_DIR": str(fresh / "inductor"),
        "TORCH_EXTENSIONS_DIR": str(fresh / "extensions"),
        "PTF_HOME": str(fresh / "ptf"),
        "OMP_NUM_THREADS": "2",
    }
    for folder in ("home", "cache", "tmp"):
        (fresh / folder).mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(repo=str(REPO), model=str(smollm2))],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    result = json.loads(line.removeprefix("RESULT "))
    assert result["backend"] == "transformers"
    assert result["patched"] == []  # every module runs its class's forward
    assert not calls.exists(), calls.read_text()  # no compiler was started
    written = [p for p in fresh.rglob("*") if p.suffix in (".so", ".o", ".c", ".cpp")]
    assert written == []  # and nothing compiled was written
    assert not list(ENGINES.rglob("*.so"))


def test_the_package_ships_no_compiled_source_patches_no_forward_subclasses_no_private_class() -> None:
    import torch
    import transformers

    sources = [p for p in ENGINES.rglob("*") if p.suffix in (".c", ".cc", ".cpp", ".h", ".cu", ".so", ".pyx")]
    assert sources == []
    for path in ENGINES.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported: dict[str, str] = {}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.split(".")[0] in ("torch", "transformers")
            ):
                for alias in node.names:
                    imported[alias.asname or alias.name] = node.module
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in targets:
                assert not (isinstance(target, ast.Attribute) and target.attr == "forward"), (
                    f"{path.name}:{node.lineno} assigns a forward"
                )
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            for base in node.bases:
                name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
                if name in imported:
                    module = imported[name]
                    public = transformers if module.startswith("transformers") else torch
                    assert not name.startswith("_") and not any(p.startswith("_") for p in module.split("."))
                    assert module.startswith("torch") or hasattr(public, name), (
                        f"{path.name}: {node.name} subclasses {module}.{name}, not a public name of {public.__name__}"
                    )
