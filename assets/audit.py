"""The checks a dataset version must pass while staged, before it is visible (write–audit–publish).

Built here because they need the factory's dedup settings, the benchmark index, the trainer's chat
template and the stage outputs; ``storage.audit`` runs them on the staged shards.

A version staged as a change over a checked parent (``DatasetStore.publish_delta``) is checked on
what changed, keeping each check's guarantee: a leak needs a changed row on one side (two unchanged
rows were checked in the parent), so the changed rows are looked up in the other side's band keys,
kept per shard (``filters.dedup.leak_keys``); a template renders per row, so only the changed rows
are rendered. Each relies on the parent having passed the check with the same settings (recorded
in its detail); otherwise the check reads the whole staged version.
"""

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.filters.decontamination import Hit, NgramIndex, check_texts, sample_texts
from ptfactory.filters.dedup.core import DedupConfig
from ptfactory.filters.dedup.leak_keys import KeyCache, Keys, probe_leaks, version_sides
from ptfactory.filters.dedup.leaks import Leak, split_leaks
from ptfactory.storage.audit import (
    Audit,
    Check,
    CheckResult,
    Delta,
    Staged,
    batches_passed,
    schema_valid,
    unique_ids,
)
from ptfactory.training.templates import template_problems

__all__ = ["AUDIT_CHECKS", "benchmark_overlap", "leak_key_cache", "publish_audit", "staged_leaks"]

# the judged_samples checks a batch must have passed to be published; judges_counted is not one:
# a judge that fails it is left out of that batch's aggregate and the batch goes on
JUDGED_BLOCKING = ("judged_samples_schema_valid", "judged_samples_unique_ids")
# what template_problems reads of a row
_RENDERED = ["sample_id", "kind", "messages", "chosen", "rejected"]
AUDIT_CHECKS = [
    "schema_valid",
    "unique_ids",
    "shards_verified",
    "no_split_leak",
    "no_benchmark_overlap",
    "chat_template_renders",
    "judged_samples_passed",
]
_EXAMPLES = 5


def leak_key_cache(settings: SettingsResource) -> KeyCache:
    """Where this machine keeps the band keys of published shards (a cache: safe to delete)."""
    return KeyCache(Path(settings.state_dir) / "cache" / "leak-keys", settings.config.dedup)


def _settings(cache: KeyCache) -> str:
    return cache.folder.name  # a hash of the settings the keys depend on


def staged_leaks(delta: Delta, cache: KeyCache, config: DedupConfig) -> list[Leak]:
    """Leaks of the staged version that involve a row it changed: each changed row against the
    other side's kept keys (every other pair was checked in the parent)."""
    shards = {split: [delta.shards[f] for f in files] for split, files in delta.split_files.items()}
    sides = version_sides(
        shards,
        delta.buckets,
        delta.read,
        cache,
        replaced=delta.replaced,
        changed=delta.changed,
        across=[split for split, rows in delta.changed.items() if rows.num_rows],
    )
    found: dict[tuple[str, str], Leak] = {}
    for split, rows in delta.changed.items():
        if rows.num_rows:
            for leak in probe_leaks(rows, split == "validation", sides, config, Keys.compute(rows, config)):
                found[(leak.validation_id, leak.train_id)] = leak
    return [found[k] for k in sorted(found)]


def _collisions(tables: list[pa.Table], index: NgramIndex) -> list[tuple[str, Hit]]:
    found = []
    for table in tables:
        ids = table.column("sample_id").to_pylist()
        hits = check_texts(sample_texts(table), index)
        found += [(sample, hit) for sample, hit in zip(ids, hits, strict=True) if hit is not None]
    return found


def benchmark_overlap(settings: SettingsResource) -> Check:
    """``no_benchmark_overlap``: no row of the staged version shares an n-gram with an item of the
    benchmark index ``decontamination`` configures (every text field, as the stage reads it), and
    every configured benchmark loaded items. Its detail is what the version was checked against:
    the index hash, n and each benchmark's item count. A delta over a parent that passed with the
    same index checks only the rows it puts in (the others were checked against this index)."""
    config = settings.config.decontamination
    loaded: list[NgramIndex] = []  # the index, loaded on first use and kept for this audit's publishes

    def no_benchmark_overlap(staged: Staged) -> CheckResult:
        if not config.enabled:
            return CheckResult(
                "no_benchmark_overlap", True, detail={"status": "decontamination.enabled is false"}
            )
        if not loaded:
            loaded.append(settings.decontamination_index())
        index = loaded[0]
        against = {"index_hash": index.content_hash, "ngram": index.n, "benchmarks": index.counts}
        delta = staged.delta
        if delta is not None and delta.passed("no_benchmark_overlap", index_hash=index.content_hash):
            tables = [t for t in delta.changed.values() if t.num_rows]
            sizes = {"rows": delta.rows, "checked_rows": sum(t.num_rows for t in tables)}
        else:
            tables = [t for t in staged.splits.values() if t.num_rows]
            sizes = {"rows": sum(t.num_rows for t in tables)}
        hits = _collisions(tables, index)
        empty = index.empty_benchmarks()
        return CheckResult(
            "no_benchmark_overlap",
            not hits and not empty,
            detail={
                "contaminated_rows": len(hits),
                "examples": "; ".join(
                    f"{sid} ~ {hit.item} ({hit.benchmark})" for sid, hit in hits[:_EXAMPLES]
                )
                or "none",
                "empty_benchmarks": ", ".join(empty) or "none",
                **against,
                **sizes,
            },
            rows=tuple(sid for sid, _ in hits),
        )

    return no_benchmark_overlap


def publish_audit(
    settings: SettingsResource, chat_tokenizer: Callable[[], Any], judged: bool = True
) -> Audit:
    """Every blocking check of a published version; ``chat_tokenizer()`` loads the tokenizer whose
    chat template the rows must render with (once, when the check first runs); ``judged=False`` for
    rows that never went through the judges (an imported table, a retraction of a checked version)."""
    dedup = settings.config.dedup
    cache = leak_key_cache(settings)

    def no_split_leak(staged: Staged) -> CheckResult:
        settings = {"threshold": dedup.threshold, "settings": _settings(cache)}
        delta = staged.delta
        if delta is not None and delta.passed("no_split_leak", **settings):
            leaks = staged_leaks(delta, cache, dedup) if len(delta.split_files) > 1 else []
            count = len(leaks)
            sizes = {
                f"{split}_rows": sum(delta.shards[f].rows for f in files)
                for split, files in delta.split_files.items()
            }
            sizes["checked_rows"] = delta.changed_rows
        else:
            count, leaks = split_leaks(staged.splits, dedup)
            sizes = {f"{split}_rows": t.num_rows for split, t in staged.splits.items()}
        return CheckResult(
            "no_split_leak",
            count == 0,
            detail={
                "leaking_pairs": count,
                **settings,
                "examples": "; ".join(f"{x.train_id}~{x.validation_id} ({x.jaccard:.2f})" for x in leaks[:5])
                or "none",
                **sizes,
            },
            rows=tuple(x.validation_id for x in leaks),
        )

    loaded: list[Any] = []  # the tokenizer, loaded on first use and kept for this audit's publishes

    def chat_template_renders(staged: Staged) -> CheckResult:
        if not loaded:
            loaded.append(chat_tokenizer())
        tokenizer = loaded[0]
        template = hashlib.sha256(
            repr((getattr(tokenizer, "chat_template", None), tokenizer.eos_token)).encode()
        ).hexdigest()[:16]
        delta = staged.delta
        if delta is not None and delta.passed("chat_template_renders", template=template):
            # a row renders on its own: the rows put in are the only ones that can fail now
            rows = [r for t in delta.changed.values() for r in t.select(_RENDERED).to_pylist()]
            extra = {"checked_rows": len(rows)}
        else:
            rows, extra = staged.table.select(_RENDERED).to_pylist(), {}
        problems = template_problems(rows, tokenizer)
        return CheckResult(
            "chat_template_renders",
            not problems,
            detail={
                "problems": len(problems),
                "first": problems[0] if problems else "none",
                "template": template,
                **extra,
            },
            rows=tuple(p.split(":", 1)[0] for p in problems),
        )

    checks: list[Check] = [
        schema_valid,
        unique_ids,
        no_split_leak,
        benchmark_overlap(settings),
        chat_template_renders,
    ]
    if judged:
        store = settings.asset_store()
        checks.append(
            batches_passed(
                "judged_samples", lambda b: store.recorded_checks("judged_samples", b), JUDGED_BLOCKING
            )
        )
    return Audit(checks)
