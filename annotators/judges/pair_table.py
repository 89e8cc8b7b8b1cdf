"""Preference candidates built column by column, for a judged batch of any size (the one
implementation: :func:`~ptfactory.annotators.judges.pairwise.preference_candidates` on dict rows
calls it).

The pairs are :func:`~ptfactory.annotators.judges.batch.pair_candidates`' (chosen first; never a
verifier-failed row chosen, never a generator's sample over a verified or human-written row). The
candidates' rows stay in Arrow: the chosen row's columns are taken whole, the prompt, chosen and
rejected turns are cut from its ``messages`` by offsets, and the comparisons become votes
aggregated by the panel's one aggregate (:func:`~ptfactory.annotators.judges.vote_columns.
aggregate`) with the batch's weights. A judge abstains (``self``) on a pair either side of which its
own model family wrote: it never ranks its family's text against another.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.annotators.judges.base import SELF, Vote
from ptfactory.annotators.judges.batch import pair_candidates
from ptfactory.annotators.judges.identity import independence_key, model_family
from ptfactory.annotators.judges.llm import LLMJudge
from ptfactory.annotators.judges.pairwise import PairwiseJudge, PairwiseReport
from ptfactory.annotators.judges.vote_columns import VoteColumns, aggregate, gc_paused
from ptfactory.storage.schema import JUDGE_VOTE, SAMPLE_SCHEMA, conform, prompt_of, response_of, sample_id
from ptfactory.storage.schema.ids import plain_sample_id

__all__ = ["preference_candidate_table"]

Array = np.ndarray[Any, Any]
_TURNS = SAMPLE_SCHEMA.field("messages").type
_SCORES = SAMPLE_SCHEMA.field("scores").type
_DECISIONS = SAMPLE_SCHEMA.field("decisions").type
_PROVENANCE = SAMPLE_SCHEMA.field("provenance").type
_AGGREGATES = ("judge_mean", "judge_median", "judge_spread", "judge_confidence", "judge_votes")


def preference_candidate_table(
    table: pa.Table,
    judges: Sequence[LLMJudge],
    margin: float,
    weights: Mapping[str, float] | None = None,
    leave_out: frozenset[str] = frozenset(),
) -> PairwiseReport:
    """The preference candidates of a judged batch (``report.table``, in the sample schema) and
    what each judge did with them. ``weights``: the judges' batch weights (a judge absent from it
    was measured by nothing: its comparisons count only where no weighted judge's do); judges in
    ``leave_out`` do not count."""
    report = PairwiseReport(table=SAMPLE_SCHEMA.empty_table())
    candidates = conform(pair_candidates(table, margin))  # nested types as the schema's: cut by them
    pairs = candidates.num_rows // 2
    if pairs == 0:
        return report
    with gc_paused():
        turns = _Turns(candidates)
        means = pc.struct_field(candidates.column("scores"), "judge_mean").to_numpy(zero_copy_only=False)
        best = np.arange(pairs) * 2  # a pair's two rows are adjacent: the chosen, then the rejected
        worst = best + 1
        instructions, bests, worsts, ids = turns.pairs(best.tolist(), worst.tolist())
        models = pc.struct_field(candidates.column("provenance"), "model").to_pylist()
        families = [
            {model_family(m) for m in (models[b], models[w]) if m} for b, w in zip(best, worst, strict=True)
        ]
        by_judge: list[_Votes] = []
        for judge in judges:
            own = [judge.family is not None and judge.family in f for f in families]
            votes = _Votes(judge, *PairwiseJudge(judge).probabilities(instructions, bests, worsts), own=own)
            decided = sum(votes.consistent)
            agree = sum(votes.first[k] for k in range(pairs) if votes.consistent[k])
            report.consistency[judge.name] = decided / pairs
            report.agreement[judge.name] = (agree / decided if decided else None, decided)
            by_judge.append(votes)
        scores = _scores(by_judge, pairs, weights, leave_out)
        ids_of = candidates.column("sample_id").to_pylist()
        chosen_ids = [ids_of[b] for b in best.tolist()]
        rejected_ids = [ids_of[w] for w in worst.tolist()]
        out = candidates.take(pa.array(best, pa.int64()))
        columns: dict[str, pa.Array] = {
            "kind": pa.array(["preference"] * pairs, pa.string()),
            "messages": turns.cut(best, keep_last=False),
            "chosen": turns.cut(best, keep_last=True),
            "rejected": turns.cut(worst, keep_last=True),
            "sample_id": pa.array(ids, pa.string()),
            "tests": pa.nulls(pairs, pa.string()),
            "entry_point": pa.nulls(pairs, pa.string()),
            "decisions": _decisions(chosen_ids, rejected_ids, means[best].tolist(), means[worst].tolist()),
            "provenance": _provenance(out.column("provenance").combine_chunks(), chosen_ids),
            "scores": scores,
            "annotation": pa.nulls(pairs, SAMPLE_SCHEMA.field("annotation").type),
        }
        for name, column in columns.items():
            out = out.set_column(out.schema.get_field_index(name), name, column)
    report.table = conform(out)
    return report


class _Turns:
    """The candidates' turns as flat columns: what the judges read and what ``sample_id`` hashes,
    without making a dict a turn. A row with tool calls or a tool turn (an agent episode) is read
    through the row functions, as their texts and ids differ from a plain chat's."""

    def __init__(self, candidates: pa.Table) -> None:
        self.messages = candidates.column("messages").combine_chunks()
        self.lengths = pc.list_value_length(self.messages).fill_null(0).to_numpy(zero_copy_only=False)
        self.lengths = self.lengths.astype(np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)
        self.flat = pc.list_flatten(self.messages)
        roles = pc.struct_field(self.flat, "role")
        calls = pc.list_value_length(pc.struct_field(self.flat, "tool_calls")).fill_null(0)
        special = pc.or_(
            pc.or_(pc.greater(calls, 0), pc.struct_field(self.flat, "tool_call_id").is_valid()),
            pc.equal(roles, "tool").fill_null(False),
        )
        self.episode = np.zeros(len(self.lengths), dtype=bool)
        parents = pc.list_parent_indices(self.messages).to_numpy(zero_copy_only=False)
        self.episode[parents[special.to_numpy(zero_copy_only=False)]] = True
        self.roles = roles.to_pylist()
        self.contents = pc.struct_field(self.flat, "content").to_pylist()

    def _plain(self, row: int) -> list[list[Any]]:
        start = int(self.starts[row])
        stop = start + int(self.lengths[row])
        return [[self.roles[i], self.contents[i]] for i in range(start, stop)]

    def pairs(self, best: list[int], worst: list[int]) -> tuple[list[str], list[str], list[str], list[str]]:
        """Per pair: the instruction, the chosen and the rejected response (what the judges compare),
        and the preference row's ``sample_id``."""
        instructions, bests, worsts, ids = [], [], [], []
        for b, w in zip(best, worst, strict=True):
            if self.episode[b] or self.episode[w]:
                chosen, rejected = self.messages[b].as_py(), self.messages[w].as_py()
                instructions.append(prompt_of(chosen))
                bests.append(response_of(chosen))
                worsts.append(response_of(rejected))
                ids.append(sample_id("preference", chosen[:-1], chosen=chosen[-1:], rejected=rejected[-1:]))
                continue
            mine, theirs = self._plain(b), self._plain(w)
            instructions.append(next((str(c) for r, c in mine if r == "user"), ""))
            bests.append(str(mine[-1][1]) if mine and mine[-1][0] == "assistant" else "")
            worsts.append(str(theirs[-1][1]) if theirs and theirs[-1][0] == "assistant" else "")
            ids.append(plain_sample_id("preference", mine[:-1], mine[-1:], theirs[-1:]))
        return instructions, bests, worsts, ids

    def cut(self, rows: Array, *, keep_last: bool) -> pa.ListArray:
        """Each row's turns but its last (``keep_last=False``: the prompt), or its last turn alone."""
        lengths, starts = self.lengths[rows], self.starts[rows]
        if keep_last:
            counts = (lengths > 0).astype(np.int64)
            index = (starts + lengths - 1)[lengths > 0]
        else:
            counts = np.maximum(lengths - 1, 0)
            ends = np.cumsum(counts)
            index = np.arange(int(ends[-1]) if len(ends) else 0) + np.repeat(starts - (ends - counts), counts)
        offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
        return pa.ListArray.from_arrays(offsets, self.flat.take(pa.array(index, pa.int64())), type=_TURNS)


class _Votes(Sequence[Vote]):
    """One judge's comparisons of every pair as the votes :func:`pairwise.pair_vote
    <ptfactory.annotators.judges.pairwise.pair_vote>` makes, held as columns: a
    :class:`~ptfactory.annotators.judges.base.Vote` is made only for a row that asks for one.
    ``own``: pairs its family wrote a side of (it abstains, ``self``)."""

    def __init__(
        self, judge: LLMJudge, forward: list[float], swapped: list[float], own: list[bool] | None = None
    ) -> None:
        self.judge, self.model = judge.name, judge.model
        self.key = independence_key(judge.family, "pairwise")
        self.identity = judge.identity_key
        self.own = own or [False] * len(forward)
        self.first = [f > 0.5 for f in forward]  # as given, the first answer is the better one
        self.consistent = [
            a == (s > 0.5) and not mine for a, s, mine in zip(self.first, swapped, self.own, strict=True)
        ]
        p_first = [round((f + s) / 2, 4) for f, s in zip(forward, swapped, strict=True)]
        self.score = [
            round(1 + 9 * p, 4) if c else None for p, c in zip(p_first, self.consistent, strict=True)
        ]
        self.confidence = [
            round(abs(2 * p - 1), 4) if c else None for p, c in zip(p_first, self.consistent, strict=True)
        ]
        self.verdict = [
            ("A" if a else "B") if c else "abstain" for a, c in zip(self.first, self.consistent, strict=True)
        ]
        details = (
            f"P(first better): {f:.2f} as given, {s:.2f} swapped"
            for f, s in zip(forward, swapped, strict=True)
        )
        self.rationale = [
            "self: its own family wrote a side of this pair"
            if mine
            else d
            if c
            else f"abstains: the verdict flipped with the order ({d})"
            for d, c, mine in zip(details, self.consistent, self.own, strict=True)
        ]
        self.method = [SELF if mine else "pairwise" for mine in self.own]

    def __len__(self) -> int:
        return len(self.score)

    def __getitem__(self, r: int) -> Vote:  # type: ignore[override]  # rows are asked one at a time
        return Vote(
            self.judge,
            self.model,
            self.score[r],
            self.verdict[r],
            self.rationale[r],
            method=self.method[r],
            confidence=self.confidence[r],
            identity=self.identity,
        )

    def fields(self) -> list[pa.Array]:
        """The votes as one array per ``JUDGE_VOTE`` field (what ``Vote.to_dict`` holds)."""
        n = len(self)
        values: dict[str, list[Any]] = {
            "judge": [self.judge] * n,
            "model": [self.model] * n,
            "score": self.score,
            "verdict": self.verdict,
            "rationale": self.rationale,
            "raw": [""] * n,
            "parsed": [True] * n,
            "method": self.method,
            "confidence": self.confidence,
            "identity": [self.identity] * n,
        }
        return [pa.array(values[f.name], f.type) for f in JUDGE_VOTE]


def _vote_columns(by_judge: list[_Votes]) -> VoteColumns:
    def matrix(rows: Callable[[_Votes], list[float | None]]) -> tuple[Array, Array]:
        values = np.array([[np.nan if x is None else x for x in rows(v)] for v in by_judge], np.float64)
        return values, ~np.isnan(values)

    score, has_score = matrix(lambda v: v.score)
    confidence, has_confidence = matrix(lambda v: v.confidence)
    fields = [votes.fields() for votes in by_judge]
    return VoteColumns(fields, score, has_score, np.ones_like(has_score), confidence, has_confidence)


def _scores(
    by_judge: list[_Votes], pairs: int, weights: Mapping[str, float] | None, leave_out: frozenset[str]
) -> pa.StructArray:
    """``scores`` of the preference rows: the comparisons as votes, their aggregates, nothing else."""
    if by_judge:
        votes = _vote_columns(by_judge)
        given = weights or {}
        agg = aggregate(
            votes,
            [float(given.get(v.judge, 0.0)) for v in by_judge],
            in_batch=[v.judge not in leave_out for v in by_judge],
            unmeasured=[v.judge not in given for v in by_judge],
            keys=[v.key for v in by_judge],
        )
        columns: dict[str, pa.Array] = {"judges": votes.struct(), **agg.columns()}
    else:  # no LLM judge: no votes, no aggregate
        columns = {name: pa.nulls(pairs, _SCORES.field(name).type) for name in _AGGREGATES}
        columns["judge_votes"] = pa.array(np.zeros(pairs, np.int32))  # no vote counted
        empty = pa.array(np.zeros(pairs + 1, dtype=np.int32))
        columns["judges"] = pa.ListArray.from_arrays(
            empty, pa.array([], _SCORES.field("judges").type.value_type), type=_SCORES.field("judges").type
        )
    arrays = [columns[f.name] if f.name in columns else pa.nulls(pairs, f.type) for f in _SCORES]
    return pa.StructArray.from_arrays(arrays, fields=list(_SCORES))


def _number(value: float) -> str:
    return float.__repr__(value) if math.isfinite(value) else json.dumps(value)


def _decisions(
    chosen: list[str], rejected: list[str], chosen_means: list[float], rejected_means: list[float]
) -> pa.ListArray:
    """One decision a row: kept as a pairwise candidate, with the pair's ids and means (the JSON
    ``json.dumps`` writes for them, made without building a dict a row)."""
    text = json.encoder.encode_basestring_ascii  # json.dumps's, for str
    details = [
        f'{{"chosen": {text(c)}, "rejected": {text(r)}, "judge_means": [{_number(a)}, {_number(b)}]}}'
        for c, r, a, b in zip(chosen, rejected, chosen_means, rejected_means, strict=True)
    ]
    n = len(details)
    item = _DECISIONS.value_type
    values = {"stage": "judge", "verdict": "keep", "reason": "pairwise_candidate"}
    arrays = [
        pa.array(details, pa.string()) if f.name == "detail" else pa.array([values[f.name]] * n, f.type)
        for f in item
    ]
    offsets = pa.array(np.arange(n + 1, dtype=np.int32))
    return pa.ListArray.from_arrays(
        offsets, pa.StructArray.from_arrays(arrays, fields=list(item)), type=_DECISIONS
    )


def _provenance(provenance: pa.StructArray, chosen_ids: list[str]) -> pa.StructArray:
    """The chosen row's provenance, its parent the chosen row and its method ``pairwise_candidate``."""
    n = len(chosen_ids)
    set_to = {"parent_id": pa.array(chosen_ids, pa.string()), "method": pa.array(["pairwise_candidate"] * n)}
    arrays = [set_to.get(f.name, pc.struct_field(provenance, f.name)) for f in _PROVENANCE]
    return pa.StructArray.from_arrays(arrays, fields=list(_PROVENANCE))
