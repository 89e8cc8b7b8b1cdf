"""The calibration store: each judge identity's weight, cut and centre, kept under the state dir.

Not the latest published manifest: a retraction or a new version must not change how the next
batch is judged, and a weight belongs to the judge that earned it, not to its name. Entries are
keyed by :func:`~ptfactory.annotators.judges.identity.identity_key` (model, revision, engine
identity with compute type and device, scoring method, prompt hash): swap the model behind
``smollm2``, or its engine, or its rubric, and the judge starts from nothing (weight 0 until it
earns one). The store remembers which identity each judge name had last, so the reset is visible
(:meth:`CalibrationStore.resets`).

What an entry holds (JSON, one file, replaced atomically):

- ``experts``: the fit on expert labels (:mod:`~ptfactory.annotators.judges.calibration_fit`):
  AUC, effective labels, cut, centre; written by the calibration asset (:meth:`put_fit`).
- ``batches``: per batch key, the AUC the judge reached against the verifiers on that batch's
  generated rows and the label counts (:meth:`record_batch`; a rerun of a batch replaces its own).

:meth:`persisted` turns an entry into what a batch without enough labels uses: the label-weighted
AUC over the measured batches and the expert fit, as a weight (``2 * AUC - 1``), with the expert
AUC and its label count kept apart so a measured batch can blend them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ptfactory.annotators.judges.weights import MIN_PER_CLASS, JudgeWeight, Persisted, weight_from_auc
from ptfactory.errors import ConfigError
from ptfactory.storage.fs import atomic_write_text

__all__ = ["STORE_FILE", "CalibrationStore"]

STORE_FILE = Path("calibration") / "judges.json"
_VERSION = 1


class CalibrationStore:
    """``<state_dir>/calibration/judges.json``; thread-safe within a process, atomic on disk."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    @classmethod
    def under(cls, state_dir: Path) -> CalibrationStore:
        return cls(Path(state_dir) / STORE_FILE)

    # -- reading ---------------------------------------------------------------------------

    def _load(self) -> dict[str, Any]:
        if not self.path.is_file():
            return {"version": _VERSION, "entries": {}, "names": {}}
        try:
            body = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"{self.path}: the judge calibration store is unreadable ({exc}); move it aside to "
                "start the judges' calibration afresh"
            ) from None
        if not isinstance(body, dict) or body.get("version") != _VERSION:
            raise ConfigError(f"{self.path}: not a calibration store of version {_VERSION}; move it aside")
        body.setdefault("entries", {})
        body.setdefault("names", {})
        return body

    def entry(self, key: str) -> dict[str, Any] | None:
        found = self._load()["entries"].get(key)
        return dict(found) if isinstance(found, dict) else None

    def persisted(self, key: str) -> Persisted | None:
        """What a batch without enough labels uses for the identity ``key`` (None: never measured)."""
        entry = self.entry(key)
        if not entry:
            return None
        experts = entry.get("experts") or {}
        measured = [b for b in (entry.get("batches") or {}).values() if b.get("auc") is not None]
        n_batches = sum(int(b["positives"]) + int(b["negatives"]) for b in measured)
        pooled = sum(float(b["auc"]) * (int(b["positives"]) + int(b["negatives"])) for b in measured)
        labels = int(experts.get("labels") or 0)
        expert_auc = experts.get("auc")
        total = n_batches + (labels if expert_auc is not None else 0)
        if total == 0:
            return None
        if expert_auc is not None:
            pooled += float(expert_auc) * labels
        value = pooled / total
        return Persisted(
            weight=weight_from_auc(value),
            auc=float(expert_auc) if expert_auc is not None else None,
            labels=labels if expert_auc is not None else 0,
            cut=experts.get("cut"),
        )

    def cut(self, key: str) -> float | None:
        return ((self.entry(key) or {}).get("experts") or {}).get("cut")

    def centre(self, key: str) -> float | None:
        return ((self.entry(key) or {}).get("experts") or {}).get("centre")

    def resets(self, identities: Mapping[str, str]) -> dict[str, str]:
        """Judge names whose identity changed since the store last saw them: name -> old key."""
        names = self._load()["names"]
        return {n: str(names[n]) for n, key in identities.items() if n in names and names[n] != key}

    # -- writing ---------------------------------------------------------------------------

    def _update(self, change: Any) -> None:
        with self._lock:
            body = self._load()
            change(body)
            atomic_write_text(self.path, json.dumps(body, indent=1, sort_keys=True) + "\n")

    def _touch(
        self, body: dict[str, Any], name: str, key: str, identity: Mapping[str, Any]
    ) -> dict[str, Any]:
        body["names"][name] = key
        entry: dict[str, Any] = body["entries"].setdefault(key, {"identity": dict(identity), "batches": {}})
        entry["identity"] = dict(identity)
        entry["updated"] = datetime.now(UTC).isoformat(timespec="seconds")
        return entry

    def record_batch(
        self,
        batch: str,
        weights: Mapping[str, JudgeWeight],
        identities: Mapping[str, tuple[str, Mapping[str, Any]]],
    ) -> int:
        """Keep each judge's measurement on ``batch`` (measured with at least MIN_PER_CLASS labels of
        each class; a rerun replaces the batch's own); returns how many were kept."""
        kept = [
            (name, w)
            for name, w in weights.items()
            if w.source == "batch"
            and w.auc is not None
            and min(w.positives, w.negatives) >= MIN_PER_CLASS
            and name in identities
        ]

        def change(body: dict[str, Any]) -> None:
            for name, w in kept:
                key, identity = identities[name]
                entry = self._touch(body, name, key, identity)
                entry.setdefault("batches", {})[batch] = {
                    "auc": w.auc,
                    "low": w.low,
                    "high": w.high,
                    "positives": w.positives,
                    "negatives": w.negatives,
                }

        if kept:
            self._update(change)
        return len(kept)

    def put_fit(self, name: str, key: str, identity: Mapping[str, Any], fit: Mapping[str, Any]) -> None:
        """The expert fit of one judge identity (replaces the previous one)."""

        def change(body: dict[str, Any]) -> None:
            self._touch(body, name, key, identity)["experts"] = dict(fit)

        self._update(change)

    def remember(self, identities: Mapping[str, tuple[str, Mapping[str, Any]]]) -> None:
        """Note the judges' current identities (a later change is then reported by :meth:`resets`)."""

        def change(body: dict[str, Any]) -> None:
            for name, (key, _) in identities.items():
                body["names"][name] = key

        self._update(change)
