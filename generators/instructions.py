"""Candidate instructions: seed tasks, self-instruct, evol-instruct and new code problems.

- Self-instruct (Wang et al., 2023): new tasks from a few sampled seed tasks, kept only if
  novel (ROUGE-L < 0.7 against the seeds and every earlier output).
- Evol-instruct (Xu et al., 2023, WizardLM): deepen a seed, add constraints, or broaden it.
- Code problems: a new function stub plus tests defining ``check(candidate)``, in the format
  of the code seeds (HumanEval).
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ptfactory.engines.base import Completion, Conversation, Engine, SamplingParams
from ptfactory.generators.config import GenerationConfig, SamplingConfig
from ptfactory.generators.novelty import NoveltyFilter, rouge_l
from ptfactory.generators.prompts import Template, template
from ptfactory.generators.records import (
    candidate_row,
    parse_code_problem,
    parse_instruction,
    provenance,
    raw_detail,
)
from ptfactory.storage.schema import from_records, prompt_of

__all__ = ["InstructionStats", "generate_instructions"]

STAGE = "generate"
_UNCHANGED = 0.9


@dataclass
class InstructionStats:
    kept: Counter[str] = field(default_factory=Counter)  # method -> rows
    dropped: Counter[str] = field(default_factory=Counter)  # reason -> rows
    exact_duplicates: int = 0


def _params(config: SamplingConfig, n: int = 1) -> SamplingParams:
    return SamplingParams(
        n=n,
        temperature=config.temperature,
        top_p=config.top_p,
        max_tokens=config.max_tokens,
        seed=config.seed,
    )


def _user_prompt(row: dict[str, Any]) -> str:
    return prompt_of(row["messages"], required=True)


def _stable_index(text: str, modulo: int) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % modulo


@dataclass
class _Asked:
    """One method's requests, and how it reads their replies into candidate rows."""

    conversations: list[Conversation]
    params: SamplingParams
    read: Callable[[list[list[Completion]]], list[dict[str, Any]]]


def _ask_together(engine: Engine, asked: list[_Asked]) -> list[list[list[Completion]]]:
    """Each method's replies, every method's requests in one engine call (``chat_many``): the
    engine batches self-instruct's, evol-instruct's and the code problems' few requests together
    (their token budgets differ), rather than one after the other. A request's text does not
    depend on its batch (per-request seeds)."""
    together = engine.chat_many([(c, method.params) for method in asked for c in method.conversations])
    replies: list[list[list[Completion]]] = []
    start = 0
    for method in asked:
        replies.append(together[start : start + len(method.conversations)])
        start += len(method.conversations)
    return replies


def generate_instructions(
    seeds: pa.Table, engine: Engine, config: GenerationConfig, batch: str
) -> tuple[pa.Table, InstructionStats]:
    seed_rows = seeds.to_pylist()
    stats = InstructionStats()
    rows: list[dict[str, Any]] = []
    sft_seeds = [r for r in seed_rows if r["kind"] == "sft"]
    code_seeds = [r for r in seed_rows if r["kind"] == "code"]

    if config.include_seeds:
        for seed in seed_rows:
            rows.append(
                candidate_row(
                    batch=batch,
                    kind=seed["kind"],
                    messages=[{"role": "user", "content": _user_prompt(seed)}],
                    prov=provenance(
                        "seed",
                        None,
                        None,
                        seed_task_id=seed["provenance"]["seed_task_id"],
                        parent_id=seed["sample_id"],
                    ),
                    stage=STAGE,
                    verdict="keep",
                    reason="seed",
                    tests=seed["tests"],
                    entry_point=seed["entry_point"],
                    trail=seed["decisions"],
                    reference=seed.get("reference"),  # the seed's own task: its reference applies
                )
            )
    novelty = NoveltyFilter(config.self_instruct.novelty_threshold, [_user_prompt(s) for s in seed_rows])
    methods = [
        _self_instruct(sft_seeds or seed_rows, engine, config, batch, novelty),
        _evolve(sft_seeds, engine, config, batch),
        _code_problems(code_seeds, engine, config, batch),
    ]
    asked = [m for m in methods if m is not None]
    for method, replies in zip(asked, _ask_together(engine, asked), strict=True):
        rows += method.read(replies)

    unique: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["sample_id"] in unique:
            stats.exact_duplicates += 1  # the same text twice is one candidate
            continue
        unique[row["sample_id"]] = row
        decision = row["decisions"][-1]
        if decision["verdict"] == "keep":
            stats.kept[row["provenance"]["method"]] += 1
        else:
            stats.dropped[decision["reason"]] += 1
    return from_records(unique.values()), stats


def _self_instruct(
    pool: list[dict[str, Any]], engine: Engine, config: GenerationConfig, batch: str, novelty: NoveltyFilter
) -> _Asked | None:
    settings = config.self_instruct
    if not settings.count or not pool:
        return None
    tpl = template("self_instruct")
    rng = random.Random(f"{batch}:self_instruct")
    prompts, parents = [], []
    for _ in range(settings.count):
        examples = rng.sample(pool, min(settings.examples, len(pool)))
        prompts.append(tpl.render(examples=[_user_prompt(e) for e in examples]))
        parents.append(examples[0])
    params = _params(config.instructions)

    def read(replies: list[list[Completion]]) -> list[dict[str, Any]]:
        return _read_self_instruct(
            replies, parents=parents, engine=engine, params=params, tpl=tpl, batch=batch, novelty=novelty
        )

    return _Asked([[{"role": "user", "content": p}] for p in prompts], params, read)


def _read_self_instruct(
    replies: list[list[Completion]],
    *,
    parents: list[dict[str, Any]],
    engine: Engine,
    params: SamplingParams,
    tpl: Template,
    batch: str,
    novelty: NoveltyFilter,
) -> list[dict[str, Any]]:
    rows = []
    for parent, (completion,) in zip(parents, replies, strict=True):
        prov = provenance(
            "self_instruct",
            engine,
            params,
            template_id=tpl.id,
            template_hash=tpl.hash,
            seed_task_id=parent["provenance"]["seed_task_id"],
            parent_id=parent["sample_id"],
            completion=completion,
        )
        instruction, failure = parse_instruction(completion.text)
        if instruction is None:
            rows.append(_dropped(batch, completion.text, prov, f"unparseable_{failure}"))
            continue
        novel, score, closest = novelty.check(instruction)
        messages = [{"role": "user", "content": instruction}]
        if not novel:
            rows.append(
                candidate_row(
                    batch=batch,
                    kind="sft",
                    messages=messages,
                    prov=prov,
                    stage=STAGE,
                    verdict="drop",
                    reason="not_novel",
                    detail=f"ROUGE-L {score:.2f} with: {(closest or '')[:200]}",
                )
            )
            continue
        novelty.add(instruction)
        rows.append(
            candidate_row(
                batch=batch,
                kind="sft",
                messages=messages,
                prov=prov,
                stage=STAGE,
                verdict="keep",
                reason="self_instruct",
                detail=f"max ROUGE-L {score:.2f}",
            )
        )
    return rows


def _evolve(
    seeds: list[dict[str, Any]], engine: Engine, config: GenerationConfig, batch: str
) -> _Asked | None:
    settings = config.evol_instruct
    chosen = seeds[: settings.count]
    if not chosen:
        return None
    jobs = []
    offset = _stable_index(batch, len(settings.operations))  # rotate, so every operation gets used
    for index, seed in enumerate(chosen):
        operation = settings.operations[(offset + index) % len(settings.operations)]
        jobs.append((seed, operation, template(f"evol_{operation}")))
    params = _params(config.instructions)
    conversations = [
        [{"role": "user", "content": tpl.render(instruction=_user_prompt(seed))}] for seed, _, tpl in jobs
    ]

    def read(replies: list[list[Completion]]) -> list[dict[str, Any]]:
        return _read_evolved(replies, jobs=jobs, engine=engine, params=params, batch=batch)

    return _Asked(conversations, params, read)


def _read_evolved(
    replies: list[list[Completion]],
    *,
    jobs: Sequence[tuple[dict[str, Any], str, Template]],
    engine: Engine,
    params: SamplingParams,
    batch: str,
) -> list[dict[str, Any]]:
    rows = []
    for (seed, operation, tpl), (completion,) in zip(jobs, replies, strict=True):
        prov = provenance(
            f"evol_instruct:{operation}",
            engine,
            params,
            template_id=tpl.id,
            template_hash=tpl.hash,
            seed_task_id=seed["provenance"]["seed_task_id"],
            parent_id=seed["sample_id"],
            completion=completion,
        )
        instruction, failure = parse_instruction(completion.text)
        if instruction is None:
            rows.append(_dropped(batch, completion.text, prov, f"unparseable_{failure}"))
            continue
        similarity = rouge_l(instruction, _user_prompt(seed))
        unchanged = similarity >= _UNCHANGED
        rows.append(
            candidate_row(
                batch=batch,
                kind="sft",
                messages=[{"role": "user", "content": instruction}],
                prov=prov,
                stage=STAGE,
                verdict="drop" if unchanged else "keep",
                reason="unchanged_by_evolution" if unchanged else "evol_instruct",
                detail=f"{operation}; ROUGE-L to the seed {similarity:.2f}",
            )
        )
    return rows


def _code_problems(
    seeds: list[dict[str, Any]], engine: Engine, config: GenerationConfig, batch: str
) -> _Asked | None:
    if not config.code.count or not seeds:
        return None
    tpl = template("code_problem")
    chosen = [seeds[i % len(seeds)] for i in range(config.code.count)]
    params = _params(config.code_problems)
    conversations = [
        [{"role": "user", "content": tpl.render(prompt=_user_prompt(s), tests=s["tests"])}] for s in chosen
    ]

    def read(replies: list[list[Completion]]) -> list[dict[str, Any]]:
        return _read_code_problems(replies, chosen=chosen, engine=engine, params=params, tpl=tpl, batch=batch)

    return _Asked(conversations, params, read)


def _read_code_problems(
    replies: list[list[Completion]],
    *,
    chosen: list[dict[str, Any]],
    engine: Engine,
    params: SamplingParams,
    tpl: Template,
    batch: str,
) -> list[dict[str, Any]]:
    rows = []
    for seed, (completion,) in zip(chosen, replies, strict=True):
        prov = provenance(
            "code_problem",
            engine,
            params,
            template_id=tpl.id,
            template_hash=tpl.hash,
            seed_task_id=seed["provenance"]["seed_task_id"],
            parent_id=seed["sample_id"],
            completion=completion,
        )
        problem, failure = parse_code_problem(completion.text)
        if problem is None:
            rows.append(_dropped(batch, completion.text, prov, f"unparseable_{failure}"))
            continue
        rows.append(
            candidate_row(
                batch=batch,
                kind="code",
                messages=[{"role": "user", "content": problem["prompt"]}],
                prov=prov,
                stage=STAGE,
                verdict="keep",
                reason="code_problem",
                tests=problem["tests"],
                entry_point=problem["entry_point"],
            )
        )
    return rows


def _dropped(batch: str, raw: str, prov: dict[str, Any], reason: str) -> dict[str, Any]:
    """A reply that did not parse: the raw text is the row's content, so nothing is lost.

    Recorded as an ``sft`` row even for code problems: without parsed tests it is not a code row.
    """
    content = raw if raw.strip() else "(empty reply)"
    return candidate_row(
        batch=batch,
        kind="sft",
        messages=[{"role": "user", "content": content}],
        prov=prov,
        stage=STAGE,
        verdict="drop",
        reason=reason,
        detail=raw_detail(reason, raw),
    )
