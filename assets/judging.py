"""``judged_samples``: every kept row (and every failing code row) scored by the judge panel, plus
the batch's preference candidates (each instruction's best over its worst answer, compared by every
LLM judge in both orders: annotators/judges/pairwise.py).

The metadata says, per judge, how its votes were read (constrained JSON, probabilities) and how
many were lost; the ``judges_counted`` check fails when a judge counts fewer than
``judging.min_counted_share`` of its votes (that judge is then left out of the aggregate and the
batch goes on). A panel whose every LLM judge is the generator's own model family is warned
about: a model prefers its own outputs (self-preference).

**Which rows are judged** (:func:`rows_to_judge`, the selection the panel is handed): the panel's
own (``judged_rows``: live rows, code rows that ran, rows the difficulty stage dropped), less

- rows dropped for a reason no judge can change (``NOT_JUDGEABLE``: truncated, contaminated,
  duplicates, a copy already in the review queue): never published whatever the panel says; and
- on a paid or remote judge engine (``openai``, ``vllm``), the rows the difficulty stage dropped for
  its band: the ``difficulty_vs_panel`` diagnostic (the panel's mean per drop reason) is kept only
  on embedded engines, where it costs CPU time and no money or remote calls.

Rows a verifier decides (code that ran, a row with a reference a verifier checks) are always
judged: the judges are weighed on them. Rows left out keep their trail and carry no votes.
"""

from collections import Counter

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.annotators.judges import LLMJudge, Panel, PanelReport
from ptfactory.annotators.judges.pair_table import preference_candidate_table
from ptfactory.annotators.judges.pairwise import PairwiseReport
from ptfactory.annotators.judges.panel import STAGE, judged_rows, means_by_drop_reason
from ptfactory.annotators.review_queue import ALREADY_QUEUED
from ptfactory.assets.budget import budget_metadata, metered, stage_guard, within_budget
from ptfactory.assets.common import check_specs, counts_md, preview_md, schema_check, unique_ids_check
from ptfactory.assets.judging_report import keep_measurements, report_metadata
from ptfactory.assets.partitions import batch_partitions
from ptfactory.assets.pools import GPU_POOL
from ptfactory.assets.resources.panel import PanelResource
from ptfactory.assets.resources.settings import SettingsResource
from ptfactory.assets.scoring import histogram_md
from ptfactory.config import FactoryConfig
from ptfactory.panel_config import panel_warning
from ptfactory.storage.audit import checks_metadata
from ptfactory.storage.schema import conform, dropped_mask

__all__ = ["NOT_JUDGEABLE", "judged_samples", "rows_to_judge", "self_preference_warning"]

# drop reasons a judge's score cannot change: the row is out of every version whatever it scores
NOT_JUDGEABLE = (
    "truncated",
    "contaminated",
    "exact_duplicate",
    "near_duplicate",
    "near_duplicate_published",
    "semantic_duplicate",
    ALREADY_QUEUED,
)
_DIAGNOSTIC = "difficulty diagnostic on a remote engine"


def _verifier_decided(table: pa.Table) -> list[bool]:
    """Code that ran, a verifier vote that decided, or a reference a verifier checks."""
    scores = table.column("scores").to_pylist()
    references = table.column("reference").to_pylist()
    kinds = table.column("kind").to_pylist()
    out = []
    for score, reference, kind in zip(scores, references, kinds, strict=True):
        ran = kind == "code" and (score or {}).get("execution") is not None
        voted = any(v["verdict"] != "abstain" for v in (score or {}).get("verifiers") or [])
        out.append(ran or voted or any(v is not None for v in (reference or {}).values()))
    return out


def rows_to_judge(table: pa.Table, remote: bool) -> tuple[list[int], Counter[str]]:
    """The rows the panel scores (see the module doc), and how many it leaves out by reason."""
    table = conform(table)
    candidates = judged_rows(table)
    if not candidates:
        return [], Counter()
    decided = _verifier_decided(table)
    dropped = dropped_mask(table).to_pylist()
    trails = table.column("decisions").to_pylist()
    chosen: list[int] = []
    left_out: Counter[str] = Counter()
    for i in candidates:
        blocked = sorted(
            {d["reason"] for d in trails[i] or [] if d["verdict"] == "drop"} & set(NOT_JUDGEABLE)
        )
        if decided[i]:
            chosen.append(i)
        elif blocked:
            left_out[blocked[0]] += 1
        elif remote and dropped[i]:
            left_out[_DIAGNOSTIC] += 1
        else:
            chosen.append(i)
    return chosen, left_out


def _judge_vs_execution(table: pa.Table, llm_judges: set[str]) -> tuple[float | None, int]:
    """How often the LLM judges' verdicts agree with the sandbox on code rows (pass = accept)."""
    agree = total = 0
    for scores, kind in zip(
        table.column("scores").to_pylist(), table.column("kind").to_pylist(), strict=True
    ):
        execution = (scores or {}).get("execution")
        if kind != "code" or not execution:
            continue
        for vote in (scores or {}).get("judges") or []:
            if vote["judge"] not in llm_judges or not vote["parsed"] or vote["score"] is None:
                continue
            total += 1
            agree += (vote["verdict"] == "accept") == (execution["status"] == "passed")
    return (agree / total if total else None), total


def self_preference_warning(config: FactoryConfig) -> str | None:
    """A warning when ANY judge shares the generator's model family (panel_config.panel_warning)."""
    return panel_warning(config.judges, config.engines.generator)


def per_judge_md(panel: Panel, report: PanelReport, families: dict[str, str]) -> dg.MetadataValue:
    lines = [
        "| judge | family | model | votes | abstained | json | probability | likelihood | lost | counted | note "
        "| tokens | est. cost $ |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for judge in panel.judges:
        st = judge.stats
        tried = st.votes - st.abstained
        # json: a constrained reply; probability: the expected score over the score tokens;
        # likelihood: the response's own token probabilities (pmi: their gain from the instruction,
        # counted with them); others (embedding, execution) in the note
        named = ("json", "probability", "likelihood", "pmi")
        other = sum(n for m, n in st.by_method.items() if m not in named)
        share = report.counted_share.get(judge.name)
        note = []
        if judge.name in report.left_out:
            note.append("left out: too few counted")
        if judge.name in report.constant:
            note.append("constant: no information, not in alpha")
        if other:
            note.append(f"{other} scored by {', '.join(sorted(m for m in st.by_method if m not in named))}")
        lines.append(
            f"| {judge.name} | {families.get(judge.name, '')} | {judge.model} | {st.votes} | {st.abstained} | "
            f"{st.share('json'):.1%} | {st.share('probability'):.1%} | {st.share('likelihood') + st.share('pmi'):.1%} | "
            f"{(st.unparsed / tried if tried else 0.0):.1%} | {f'{share:.1%}' if share is not None else 'n/a'} | "
            f"{'; '.join(note)} | {st.prompt_tokens + st.completion_tokens} | {st.cost_usd:.6f} |"
        )
    return dg.MetadataValue.md("\n".join(lines))


def pairwise_md(pairwise: PairwiseReport) -> dict[str, dg.MetadataValue]:
    """Each LLM judge compared the best and the worst answer of every instruction with a wide enough
    score gap, in both orders: its swap consistency, and how often it agrees with the score gap."""
    out: dict[str, dg.MetadataValue] = {"pairwise_pairs": dg.MetadataValue.int(pairwise.count)}
    if not pairwise.count:
        return out
    lines = ["| judge | pairs | swap consistency | agrees with the score gap |", "|---|---|---|---|"]
    for name, consistency in pairwise.consistency.items():
        agree, decided = pairwise.agreement[name]
        if consistency is not None:
            out[f"swap_consistency_{name}"] = dg.MetadataValue.float(round(consistency, 4))
        lines.append(
            f"| {name} | {pairwise.count} | {'n/a' if consistency is None else f'{consistency:.1%}'} | "
            + (f"{agree:.1%} of {decided} |" if agree is not None else "n/a |")
        )
    out["pairwise"] = dg.MetadataValue.md("\n".join(lines))
    return out


def gate_md(gate: dict[str, tuple[int, float | None]]) -> dg.MetadataValue:
    """Does the difficulty gate agree with the panel? The judge mean of the rows each of its reasons
    dropped (judged anyway, keeping their drop) beside the rows it kept."""
    lines = ["| rows | count | judge mean |", "|---|---|---|"]
    lines += [f"| {k} | {n} | {'n/a' if m is None else f'{m:.2f}'} |" for k, (n, m) in gate.items()]
    return dg.MetadataValue.md("\n".join(lines))


def counted_check(report: PanelReport, minimum: float) -> dg.AssetCheckResult:
    shares = {k: v for k, v in report.counted_share.items() if v is not None}
    return dg.AssetCheckResult(
        check_name="judged_samples_judges_counted",
        passed=not report.left_out,
        description=(
            f"judges under {minimum:.0%} counted votes, left out of the aggregate: {', '.join(report.left_out)}"
            if report.left_out
            else f"every judge counts at least {minimum:.0%} of its votes"
        ),
        metadata={f"counted_share_{k}": dg.MetadataValue.float(v) for k, v in shares.items()},
    )


@dg.asset(
    partitions_def=batch_partitions,
    group_name="judge",
    pool=GPU_POOL,
    io_manager_key="samples_io",
    dagster_type=dg.Any,
    kinds={"parquet"},
    check_specs=check_specs("judged_samples", ["schema_valid", "unique_ids", "judges_counted"]),
)
def judged_samples(
    context: dg.AssetExecutionContext,
    settings: SettingsResource,
    panel: PanelResource,
    difficulty_scored: pa.Table,
) -> dg.MaterializeResult:  # type: ignore[type-arg]  # Dagster reads the bare class
    """Every kept row, and every failing code row, scored by the judge panel (factory.yaml
    ``judges``): each vote with how it was read, the mean, median, spread and confidence; votes
    that yield nothing are kept raw, marked unparsed and left out of the aggregate. Rows no judge
    can change are not scored (the module doc)."""
    factory_config = settings.config
    specs = factory_config.judges  # which judges exist, their types and families: factory.yaml only
    chosen, left_out = rows_to_judge(difficulty_scored, panel.remote())
    skip = sorted(set(judged_rows(difficulty_scored)) - set(chosen))
    if skip:  # the rows left out pass by the panel, unchanged
        rest = sorted(set(range(difficulty_scored.num_rows)) - set(skip))
        skipped = difficulty_scored.take(pa.array(skip, pa.int64()))
        difficulty_scored = difficulty_scored.take(pa.array(rest, pa.int64()))

    def judge(rows: pa.Table) -> tuple[Panel, pa.Table, PanelReport, PairwiseReport]:
        built = panel.panel()
        table, report = built.judge_table(rows)
        # the best and the worst answer of an instruction, compared in both orders: a preference row
        pairwise = preference_candidate_table(
            table,
            [j for j in built.judges if isinstance(j, LLMJudge)],
            factory_config.datasets.pair_margin,
            built.weights,
            frozenset(report.left_out),
        )
        return built, table, report, pairwise

    # rows the budget stopped before their votes: dropped as budget_exhausted (assets/budget.py)
    guard, engines = stage_guard(context, settings, "judged_samples"), panel.judge_engines()
    with metered(guard, engines):
        (built, table, report, pairwise), unfinished = within_budget(
            guard,
            [e for e, _ in engines],
            difficulty_scored,
            judge,
            stage=STAGE,
            domain=judged_rows(difficulty_scored),
        )
    # each judge's weight measured on this batch, kept under its identity for later batches
    recorded = keep_measurements(built, report, context.partition_key)
    live = table.filter(pc.invert(dropped_mask(table)))
    means = [m for m in (s["judge_mean"] for s in live.column("scores").to_pylist() if s) if m is not None]
    gate = means_by_drop_reason(table)
    llm_names = frozenset(j.name for j in specs if j.type == "llm")
    llm_gate = means_by_drop_reason(table, judges=llm_names) if llm_names else None
    agreement, compared = _judge_vs_execution(table, set(llm_names))
    if pairwise.table is not None and pairwise.count:
        table = pa.concat_tables([conform(table), pairwise.table])
    if unfinished.num_rows:
        table = pa.concat_tables([conform(table), conform(unfinished)])
    if skip:
        table = pa.concat_tables([conform(table), conform(skipped)])
    families = {j.name: j.family or "" for j in specs}
    warning = self_preference_warning(factory_config)
    if warning:
        context.log.warning(warning)
    for name in report.left_out:
        context.log.warning(f"judge {name!r} counted {report.counted_share[name]:.1%} of its votes: left out")
    total_votes = sum(j.stats.votes for j in built.judges)
    checks = [
        schema_check(table, "judged_samples"),
        unique_ids_check(table, "judged_samples"),
        counted_check(report, built.min_counted_share),
    ]
    # kept in the file too: publishing asks whether every batch of a version passed (offline)
    table = table.replace_schema_metadata(
        {**(table.schema.metadata or {}), **checks_metadata({c.check_name or "": c.passed for c in checks})}
    )
    return dg.MaterializeResult(
        value=table,
        metadata={
            "dagster/row_count": dg.MetadataValue.int(table.num_rows),
            "krippendorff_alpha": (
                dg.MetadataValue.float(round(report.alpha, 4)) if report.alpha is not None else None
            ),
            "judges": per_judge_md(built, report, families),
            "judge_families": dg.MetadataValue.int(len(set(families.values()))),
            "judges_left_out": dg.MetadataValue.text(", ".join(report.left_out) or "none"),
            "judges_constant": dg.MetadataValue.text(", ".join(report.constant) or "none"),
            "self_preference_warning": dg.MetadataValue.text(warning or "none"),
            # each judge's weight on this batch and where it came from (batch AUC, persisted, none)
            "calibration_weights": dg.MetadataValue.text(report.weights_line()),
            "parse_failure_rate": dg.MetadataValue.float(
                round(sum(j.stats.unparsed for j in built.judges) / total_votes, 4) if total_votes else 0.0
            ),
            **{
                f"counted_share_{name}": dg.MetadataValue.float(share)
                for name, share in report.counted_share.items()
                if share is not None
            },
            "score_histogram": histogram_md(means, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "judge mean"),
            "judge_vs_execution_agreement": (
                dg.MetadataValue.float(round(agreement, 4)) if agreement is not None else None
            ),
            "judge_vs_execution_compared": dg.MetadataValue.int(compared),
            "estimated_cost_usd": dg.MetadataValue.float(
                float(round(sum(j.stats.cost_usd for j in built.judges), 6))
            ),
            # the panel's totals, under the keys the run summary and the version stats add up
            "prompt_tokens": dg.MetadataValue.int(sum(j.stats.prompt_tokens for j in built.judges)),
            "completion_tokens": dg.MetadataValue.int(sum(j.stats.completion_tokens for j in built.judges)),
            **report_metadata(report, recorded),
            **pairwise_md(pairwise),
            **budget_metadata(guard, unfinished),
            "difficulty_vs_panel": gate_md(gate),
            # the same, each row's mean over the LLM judges' votes alone (no verifier in it)
            "difficulty_vs_llm_judges": gate_md(llm_gate) if llm_gate is not None else None,
            # rows the panel did not score because no judge could change them (assets/judging.py)
            "judged_rows": dg.MetadataValue.int(len(chosen)),
            "not_judged": counts_md(left_out, "left out"),
            "preview": preview_md(table),
        },
        check_results=checks,
    )
