"""The checks a dataset version must pass while staged, before it is visible (write–audit–publish).

Built here because they need the factory's dedup settings, the trainer's chat template and the
stage outputs; ``storage.audit`` runs them on the staged shards.
"""

from ptfactory.assets.resources import FactoryResource
from ptfactory.filters.dedup.leaks import split_leaks
from ptfactory.storage.audit import (
    Audit,
    Check,
    CheckResult,
    Staged,
    batches_passed,
    schema_valid,
    unique_ids,
)
from ptfactory.training.templates import template_problems

__all__ = ["AUDIT_CHECKS", "publish_audit"]

# the judged_samples checks a batch must have passed to be published; judges_counted is not one:
# a judge that fails it is left out of that batch's aggregate and the batch goes on
JUDGED_BLOCKING = ("judged_samples_schema_valid", "judged_samples_unique_ids")
AUDIT_CHECKS = [
    "schema_valid",
    "unique_ids",
    "shards_verified",
    "no_split_leak",
    "chat_template_renders",
    "judged_samples_passed",
]


def publish_audit(factory: FactoryResource, judged: bool = True) -> Audit:
    """Every blocking check of a published version; ``judged=False`` for rows that never went
    through the judges (an imported table, a retraction of a checked version)."""
    dedup = factory.config.dedup.to_config()

    def no_split_leak(staged: Staged) -> CheckResult:
        count, leaks = split_leaks(staged.splits, dedup)
        return CheckResult(
            "no_split_leak",
            count == 0,
            detail={
                "leaking_pairs": count,
                "threshold": dedup.threshold,
                "examples": "; ".join(f"{x.train_id}~{x.validation_id} ({x.jaccard:.2f})" for x in leaks[:5])
                or "none",
                **{f"{split}_rows": t.num_rows for split, t in staged.splits.items()},
            },
            rows=tuple(x.validation_id for x in leaks),
        )

    def chat_template_renders(staged: Staged) -> CheckResult:
        problems = template_problems(staged.table.to_pylist(), factory.chat_tokenizer())
        return CheckResult(
            "chat_template_renders",
            not problems,
            detail={"problems": len(problems), "first": problems[0] if problems else "none"},
            rows=tuple(p.split(":", 1)[0] for p in problems),
        )

    checks: list[Check] = [schema_valid, unique_ids, no_split_leak, chat_template_renders]
    if judged:
        store = factory.asset_store()
        checks.append(
            batches_passed(
                "judged_samples", lambda b: store.recorded_checks("judged_samples", b), JUDGED_BLOCKING
            )
        )
    return Audit(checks)
