"""``rl`` datasets: verifiable prompts that passed the gates, with the student's pass rate, kept in the
band where a policy gradient has signal; published, pulled and imported like sft and preference."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pyarrow as pa

from ptfactory.generators.procedural import draw_seed_rows
from ptfactory.generators.seeds import parse_seed
from ptfactory.storage.assemble import assemble_rl
from ptfactory.storage.importer import import_table
from ptfactory.storage.pull import pull
from ptfactory.storage.schema import from_records, sample_id, validate_table
from ptfactory.storage.versions import DatasetStore
from ptfactory.training.rl import measure_pass_rates
from tests.training.scripted import ScriptedEngine


def _row(question: str, answer: str | None = None, **extra: Any) -> dict[str, Any]:
    messages = [{"role": "user", "content": question}]
    if answer is not None:
        messages.append({"role": "assistant", "content": answer})
    kind = extra.pop("kind", "sft")
    return {
        "sample_id": sample_id(
            kind, messages, tests=extra.get("tests"), entry_point=extra.get("entry_point")
        ),
        "batch": extra.pop("batch", "b1"),
        "kind": kind,
        "messages": messages,
        "decisions": extra.pop(
            "decisions", [{"stage": "seed", "verdict": "keep", "reason": "t", "detail": None}]
        ),
        **extra,
    }


def _rate(solved: int, k: int = 4) -> dict[str, Any]:
    return {
        "difficulty": {
            "method": "pass_rate",
            "value": 1 - solved / k,
            "detail": json.dumps({"solved": solved, "k": k}),
        }
    }


REF = {"answer": "4", "source": "answer"}


def test_the_band_keeps_prompts_solved_sometimes() -> None:
    rows = [
        _row("2+2?", "#### 4", reference=REF, scores=_rate(2)),
        _row("2+2?", "It is 4", reference=REF, scores=_rate(2)),  # the same prompt answered again
        _row("1+1?", "#### 2", reference={"answer": "2", "source": "answer"}, scores=_rate(4)),
        _row("9*9?", "#### 1", reference={"answer": "81", "source": "answer"}, scores=_rate(0)),
        _row("Say hi.", "Hi", scores=_rate(2)),  # nothing checks it
        _row("3+3?", "#### 6", reference={"answer": "6", "source": "answer"}),  # never measured
        _row(
            "5+5?",
            "#### 10",
            reference={"answer": "10", "source": "answer"},
            scores=_rate(1),
            decisions=[{"stage": "dedup", "verdict": "drop", "reason": "near_duplicate", "detail": None}],
        ),
        _row(
            'def f(x):\n    """Double x."""\n',
            "def f(x):\n    return 3 * x\n",
            kind="code",
            tests="def check(c):\n    assert c(1) == 2\n",
            entry_point="f",
            scores={**_rate(2), "execution": {"status": "failed"}},
        ),
        _row(
            'def g(x):\n    """Double x."""\n',
            "def g(x):\n    return 2 * x\n",
            kind="code",
            tests="def check(c):\n    assert c(1) == 2\n",
            entry_point="g",
            scores={**_rate(1), "execution": {"status": "passed"}},
        ),
    ]
    assembled = assemble_rl(from_records(rows))
    table = assembled.table
    validate_table(table)
    assert assembled.skipped == {
        "duplicate_prompt": 1,
        "too_easy": 1,
        "too_hard": 1,
        "unverifiable": 1,
        "no_pass_rate": 1,
        "dropped_upstream": 1,
        "tests_unproven": 1,
    }
    kept = {r["messages"][0]["content"]: r for r in table.to_pylist()}
    assert set(kept) == {"2+2?", 'def g(x):\n    """Double x."""\n'}
    assert all(r["kind"] == "rl" and r["messages"][-1]["role"] == "user" for r in kept.values())
    detail = json.loads(kept["2+2?"]["decisions"][-1]["detail"])
    assert detail == {"verifier": "answer", "pass_rate": 0.5, "k": 4, "band": [0.0, 1.0]}
    assert kept['def g(x):\n    """Double x."""\n']["tests"] and kept["2+2?"]["reference"]["answer"] == "4"
    assert assemble_rl(from_records(rows), band=(0.0, 0.4)).table.num_rows == 1  # only g (0.25)


def test_pass_rates_are_measured_by_the_verifiers() -> None:
    seeds = draw_seed_rows(["chain_sum"], 2, seed=0)
    rows = []
    for seed in seeds:
        task = parse_seed(seed["id"], seed)
        rows.append(_row(task.prompt, reference=task.reference()))
    engine = ScriptedEngine(
        model_id="scripted",
        script={
            "1663 - 5242": ["<answer>-14282</answer>", "<answer>1</answer>", "<answer>-14282</answer>", "no"],
            "4 - 1 - 7": ["<answer>-4</answer>"],
        },
    )
    measured = measure_pass_rates(from_records(rows), engine, k=4)
    difficulty = [s["difficulty"] for s in measured.column("scores").to_pylist()]
    assert [d["method"] for d in difficulty] == ["pass_rate", "pass_rate"]
    assert [round(1 - d["value"], 2) for d in difficulty] == [0.5, 1.0]
    assembled = assemble_rl(measured)
    assert assembled.table.num_rows == 1 and assembled.skipped == {"too_easy": 1}


def test_rl_versions_publish_pull_and_import(
    home: Path, tmp_path: Path, ptf: Callable[..., CompletedProcess[str]]
) -> None:
    rows = [
        _row(f"{i}+{i}?", reference={"answer": str(2 * i), "source": "answer"}, kind="rl") for i in range(6)
    ]
    datasets = DatasetStore(str(home))
    published = datasets.publish("rl", from_records(rows), kind="rl", config_hash="t")
    assert published.manifest.kind == "rl" and published.manifest.rows == 6
    receipt = pull(datasets, "rl@v1", tmp_path / "pulled")
    assert receipt.manifest.kind == "rl" and (tmp_path / "pulled" / "ptf_pull.json").is_file()

    table, kind = import_table([{"prompt": "What is 7 * 6?", "answer": 42}], None, "grpo.jsonl")
    assert kind == "rl" and table.column("reference").to_pylist()[0]["answer"] == "42"
    records = [{**r, "provenance": None} for r in from_records(rows).to_pylist()]
    table, kind = import_table(records, "rl", "records.jsonl")
    assert kind == "rl" and table.num_rows == 6

    source = tmp_path / "rl.jsonl"
    source.write_text(
        json.dumps({"prompt": "What is 7 * 6?", "answer": 42}) + "\n" + json.dumps({"prompt": "Hi"}) + "\n"
    )
    bad = ptf("datasets", "import", str(source), "--name", "rl-import", env={"PTF_HOME": str(home)})
    assert bad.returncode == 2 and "row 2" in bad.stderr  # a prompt without its answer
    source.write_text(json.dumps({"prompt": "What is 7 * 6?", "answer": 42}) + "\n")
    good = ptf(
        "datasets", "import", str(source), "--name", "rl-import", "--kind", "rl", env={"PTF_HOME": str(home)}
    )
    assert good.returncode == 0, good.stderr
    assert DatasetStore(str(home)).resolve("rl-import@latest").kind == "rl"
    assert isinstance(datasets.read("rl@v1"), pa.Table)
