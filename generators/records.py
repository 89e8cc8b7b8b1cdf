"""Building candidate rows, and parsing model output into instructions and code problems.

Parsers return ``(value, None)`` or ``(None, reason)``: a reply that does not parse is kept
as a dropped row with its raw text and a snake_case reason, never silently lost.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from ptfactory.engines.base import Completion, Engine, SamplingParams
from ptfactory.filters.execution.programs import code_blocks
from ptfactory.storage.schema import sample_id
from ptfactory.version import code_version

__all__ = [
    "candidate_row",
    "extract_code_blocks",
    "parse_code_problem",
    "parse_instruction",
    "provenance",
]

_TASK_PREFIX = re.compile(
    r"^\s*(?:\*\*)?(?:new\s+)?(?:task|instruction)\s*\d*\s*(?:\*\*)?\s*[:.-]\s*(?:\*\*)?\s*", re.I
)
MIN_WORDS = 3


def provenance(
    method: str,
    engine: Engine | None,
    params: SamplingParams | None,
    *,
    template_id: str | None = None,
    template_hash: str | None = None,
    seed_task_id: str | None = None,
    parent_id: str | None = None,
    completion: Completion | None = None,
) -> dict[str, Any]:
    return {
        "method": method,
        "template_id": template_id,
        "template_hash": template_hash,
        "engine": engine.backend if engine else None,
        "model": engine.model_id if engine else None,
        "sampling_params": params.to_json() if params else None,
        "seed_task_id": seed_task_id,
        "parent_id": parent_id,
        "code_version": code_version(),
        "prompt_tokens": completion.prompt_tokens if completion else None,
        "completion_tokens": completion.completion_tokens if completion else None,
        # "length": max_tokens cut the text; the difficulty stage drops it as truncated
        "finish_reason": completion.finish_reason if completion else None,
    }


def candidate_row(
    *,
    batch: str,
    kind: str,
    messages: list[dict[str, str]],
    prov: dict[str, Any],
    stage: str,
    verdict: str,
    reason: str,
    detail: str | None = None,
    tests: str | None = None,
    entry_point: str | None = None,
    trail: list[dict[str, Any]] | None = None,
    reference: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A candidate row; ``reference`` only where the seed's reference still applies (the seed's own
    instruction and responses to it; never a derived task)."""
    return {
        "sample_id": sample_id(kind, messages, tests=tests, entry_point=entry_point),
        "batch": batch,
        "kind": kind,
        "messages": messages,
        "tests": tests,
        "entry_point": entry_point,
        "language": "python" if kind == "code" else None,
        "provenance": prov,
        "reference": reference,
        "decisions": [
            *(trail or []),
            {"stage": stage, "verdict": verdict, "reason": reason, "detail": detail},
        ],
    }


def parse_instruction(text: str) -> tuple[str | None, str | None]:
    """The task a model wrote, without its "Task:" label; or a reason it is unusable."""
    lines = [line.strip() for line in text.strip().splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return None, "empty_reply"
    first = next((i for i, line in enumerate(lines) if _TASK_PREFIX.match(line)), 0)
    body = [_TASK_PREFIX.sub("", lines[first])]
    for line in lines[first + 1 :]:
        if _TASK_PREFIX.match(line):
            break  # the model went on to list more tasks; take the first
        body.append(line)
    instruction = " ".join(part for part in body if part).strip().strip('"').strip()
    if len(instruction.split()) < MIN_WORDS:
        return None, "too_short"
    return instruction, None


def extract_code_blocks(text: str) -> list[str]:
    return [block.strip("\n") for block in code_blocks(text)]


def parse_code_problem(text: str) -> tuple[dict[str, str] | None, str | None]:
    """A function stub (signature + docstring) and tests defining ``check(candidate)``.

    Parsing only (``ast.parse``): nothing the model wrote is executed here.
    """
    blocks = extract_code_blocks(text)
    if len(blocks) < 2:
        return None, "missing_code_blocks"
    stub, tests = blocks[0], blocks[1]
    try:
        stub_tree, test_tree = ast.parse(stub), ast.parse(tests)
    except SyntaxError:
        return None, "syntax_error"
    functions = [n for n in stub_tree.body if isinstance(n, ast.FunctionDef)]
    if not functions:
        return None, "no_function"
    if not any(isinstance(n, ast.FunctionDef) and n.name == "check" for n in test_tree.body):
        return None, "tests_without_check"
    if not any(isinstance(n, ast.Assert) for n in ast.walk(test_tree)):
        return None, "tests_without_asserts"
    return {"prompt": stub + "\n", "tests": tests + "\n", "entry_point": functions[-1].name}, None


def raw_detail(reason: str, raw: str) -> str:
    """What a dropped row records about a reply that did not parse."""
    return json.dumps({"reason": reason, "raw": raw[:4000]}, ensure_ascii=False)
