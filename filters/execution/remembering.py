"""A sandbox that runs each distinct job once per stage and hands back the same result after.

A stage that its budget stops is replayed over prefixes of its rows (``assets/budget.py``): the
engine's answers come from the response cache, and without this the sandbox would run the same
student programs again at every step of the search. Here the replay gets the first pass's
results: nothing runs twice, and the rows the replay keeps carry what the stopped pass measured
(a program near its timeout cannot change status between the two).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections.abc import Mapping, Sequence

from ptfactory.filters.execution.base import Job, Sandbox
from ptfactory.filters.execution.limits import ExecResult, Limits

__all__ = ["Remembering"]


def _job_key(files: Mapping[str, str | bytes], command: Sequence[str], limits: Limits) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        content = files[name]
        data = content.encode() if isinstance(content, str) else content
        digest.update(json.dumps([name, isinstance(content, str), len(data)]).encode())
        digest.update(data)
    digest.update(json.dumps([list(command), limits.to_dict()], sort_keys=True).encode())
    return digest.hexdigest()


class Remembering(Sandbox):
    """Wraps ``inner``; ``runs`` counts the jobs it sent there. A ``sandbox_error`` (the sandbox
    failed, not the code) is not remembered: the next call tries again."""

    def __init__(self, inner: Sandbox) -> None:
        super().__init__(inner.limits, inner.workers)
        self.inner = inner
        self.backend = inner.backend
        self.runs = 0
        self._results: dict[str, ExecResult] = {}
        self._lock = threading.Lock()

    def _recall(self, key: str) -> ExecResult | None:
        with self._lock:
            found = self._results.get(key)
        return dataclasses.replace(found) if found is not None else None  # a copy: callers may edit

    def _keep(self, key: str, result: ExecResult) -> None:
        with self._lock:
            self.runs += 1
            if result.status != "sandbox_error":
                self._results[key] = dataclasses.replace(result)

    def run(
        self, files: Mapping[str, str | bytes], command: Sequence[str], limits: Limits | None = None
    ) -> ExecResult:
        key = _job_key(files, command, limits or self.limits)
        found = self._recall(key)
        if found is not None:
            return found
        result = self.inner.run(files, command, limits)
        self._keep(key, result)
        return result

    def run_many(self, jobs: Sequence[Job], limits: Limits | None = None) -> list[ExecResult]:
        """The jobs not seen before go to ``inner.run_many`` together (each distinct job once), so
        a backend's own batching (a Ray cluster's) still applies."""
        keys = [_job_key(job.files, job.command, limits or self.limits) for job in jobs]
        results: dict[str, ExecResult] = {}
        missing: dict[str, Job] = {}
        for key, job in zip(keys, jobs, strict=True):
            found = results.get(key) or self._recall(key)
            if found is not None:
                results[key] = found
            else:
                missing.setdefault(key, job)
        fresh = self.inner.run_many(list(missing.values()), limits)
        for key, result in zip(missing, fresh, strict=True):
            self._keep(key, result)
            results[key] = result
        return [dataclasses.replace(results[key]) for key in keys]

    def close(self) -> None:
        self.inner.close()
