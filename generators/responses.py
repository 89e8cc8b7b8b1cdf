"""Candidate responses: ``n`` samples per kept instruction from the generator engine, plus the
seed's reference answer where there is one (it is a candidate like any other, and later the
natural "chosen" side of a preference pair)."""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.engines.base import Engine, SamplingParams
from ptfactory.generators.config import SamplingConfig
from ptfactory.generators.prompts import Template, template
from ptfactory.generators.records import candidate_row, provenance
from ptfactory.storage.schema import dropped_mask, from_records

__all__ = ["ResponseStats", "code_template", "generate_responses"]

STAGE = "respond"


def code_template(prompt: str) -> Template:
    """How a code task is asked: a stub written as code (a signature with its docstring, a class
    to complete: it parses and defines something) is completed inside a ```python block
    (respond_code); a task in words ("Write a function that ...") is asked as it is
    (respond_code_text): inside a code block the model took the prose for code, and so did the
    harness when a reply lacked the function."""
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError):
        return template("respond_code_text")
    defines = any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for n in ast.walk(tree)
    )
    return template("respond_code" if defines else "respond_code_text")


@dataclass
class ResponseStats:
    kept: Counter[str] = field(default_factory=Counter)  # method -> rows
    dropped: Counter[str] = field(default_factory=Counter)  # reason -> rows
    instructions: int = 0


def generate_responses(
    instructions: pa.Table, seeds: pa.Table, engine: Engine, sampling: SamplingConfig
) -> tuple[pa.Table, ResponseStats]:
    stats = ResponseStats()
    kept = (
        instructions.filter(pc.invert(dropped_mask(instructions))) if instructions.num_rows else instructions
    )
    rows_in = kept.to_pylist()
    stats.instructions = len(rows_in)
    references = {
        s["sample_id"]: s["messages"][-1]["content"]
        for s in seeds.to_pylist()
        if s["messages"][-1]["role"] == "assistant"
    }
    params = SamplingParams(
        n=sampling.n,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        max_tokens=sampling.max_tokens,
        seed=sampling.seed,
    )
    templates = {row["sample_id"]: code_template(row["messages"][0]["content"]) for row in rows_in}
    conversations = []
    for row in rows_in:
        prompt = row["messages"][0]["content"]
        text = templates[row["sample_id"]].render(prompt=prompt) if row["kind"] == "code" else prompt
        conversations.append([{"role": "user", "content": text}])
    replies = engine.chat(conversations, params)

    out: dict[str, dict[str, Any]] = {}
    for row, conversation, completions in zip(rows_in, conversations, replies, strict=True):
        trail = row["decisions"]
        prompt = row["messages"][0]["content"]
        is_code = row["kind"] == "code"
        code_tpl = templates[row["sample_id"]]
        for index, completion in enumerate(completions):
            prov = provenance(
                "response",
                engine,
                params,
                template_id=code_tpl.id if is_code else "chat:raw",
                template_hash=code_tpl.hash if is_code else None,
                seed_task_id=row["provenance"]["seed_task_id"],
                parent_id=row["sample_id"],
                completion=completion,
            )
            empty = not completion.text.strip()
            messages = [
                {"role": "user", "content": conversation[0]["content"] if is_code else prompt},
                {"role": "assistant", "content": completion.text},
            ]
            candidate = candidate_row(
                batch=row["batch"],
                kind=row["kind"],
                messages=messages,
                prov=prov,
                stage=STAGE,
                verdict="drop" if empty else "keep",
                reason="engine_error" if completion.failed else "empty_response" if empty else "sampled",
                detail=f"sample {index + 1}/{len(completions)}; finish={completion.finish_reason}",
                tests=row["tests"],
                entry_point=row["entry_point"],
                trail=trail,
                reference=row.get("reference"),  # set only on a seed's own instruction
            )
            _add(out, candidate, stats)
        seed_id = row["provenance"]["parent_id"] if row["provenance"]["method"] == "seed" else None
        if seed_id in references:
            reference = candidate_row(
                batch=row["batch"],
                kind=row["kind"],
                messages=[
                    {"role": "user", "content": prompt},
                    {"role": "assistant", "content": references[seed_id]},
                ],
                prov=provenance(
                    "reference",
                    None,
                    None,
                    seed_task_id=row["provenance"]["seed_task_id"],
                    parent_id=row["sample_id"],
                ),
                stage=STAGE,
                verdict="keep",
                reason="reference",
                tests=row["tests"],
                entry_point=row["entry_point"],
                trail=trail,
                reference=row.get("reference"),
            )
            _add(out, reference, stats)
    return from_records(out.values()), stats


def _add(out: dict[str, dict[str, Any]], row: dict[str, Any], stats: ResponseStats) -> None:
    if row["sample_id"] in out:
        return  # two identical samples (e.g. greedy decoding with n > 1) are one candidate
    out[row["sample_id"]] = row
    decision = row["decisions"][-1]
    if decision["verdict"] == "keep":
        stats.kept[row["provenance"]["method"]] += 1
    else:
        stats.dropped[decision["reason"]] += 1
