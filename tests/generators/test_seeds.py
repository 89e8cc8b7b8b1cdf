import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ptfactory.errors import SeedError
from ptfactory.generators.seeds import read_seeds, seeds_to_table
from ptfactory.storage.schema import validate_table

CODE = {
    "id": "c1",
    "kind": "code",
    "instruction": "def add(a, b):\n",
    "response": "    return a + b\n",
    "entry_point": "add",
    "tests": "def check(candidate):\n    assert candidate(1, 2) == 3\n",
}


def _jsonl(tmp_path: Path, *rows: object, raw: bytes | None = None) -> Path:
    path = tmp_path / "seeds.jsonl"
    if raw is not None:
        path.write_bytes(raw)
    else:
        path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_reads_the_three_seed_shapes(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path,
        {"instruction": "Name a color."},
        {"id": 7, "instruction": "Rewrite it.", "input": "The cat sat.", "response": "It sat, the cat."},
        "",
        CODE,
    )
    tasks = read_seeds(path)
    assert [t.kind for t in tasks] == ["sft", "sft", "code"]
    assert tasks[0].id.startswith("seed-")
    assert tasks[1].id == "7"
    assert tasks[1].prompt == "Rewrite it.\n\nThe cat sat."
    table = seeds_to_table(tasks, "b1")
    validate_table(table)
    rows = table.to_pylist()
    assert [len(r["messages"]) for r in rows] == [1, 2, 2]
    assert rows[2]["entry_point"] == "add" and rows[2]["language"] == "python"
    assert rows[1]["provenance"]["seed_task_id"] == "7"
    assert rows[0]["decisions"][0]["reason"] == "instruction_only"
    assert rows[1]["decisions"][0] == {
        "stage": "seed",
        "verdict": "keep",
        "reason": "with_reference",
        "detail": "seeds.jsonl:2",
    }


def test_mbpp_style_tests_are_code_seeds(tmp_path: Path) -> None:
    # top-level asserts that call the entry point by name, inside a loop too: run as they stand
    mbpp = {
        **CODE,
        "id": "c2",
        "tests": "assert add(1, 2) == 3\nfor i in range(3):\n    assert add(i, 0) == i\n",
    }
    (task,) = read_seeds(_jsonl(tmp_path, mbpp))
    assert task.kind == "code" and task.tests == mbpp["tests"]
    # without "kind", tests and an entry point make a code seed
    (task,) = read_seeds(_jsonl(tmp_path, {k: v for k, v in mbpp.items() if k != "kind"}))
    assert task.kind == "code"
    # MBPP's own row: its test_list as a list of assert lines and no entry point (both were refused:
    # "field 'tests' must be text", "field 'entry_point' is missing"); the asserts name the function
    native = {
        "id": "c3",
        "instruction": CODE["instruction"],
        "tests": ["assert add(1, 2) == 3", "assert add(0, 0) == 0"],
    }
    (task,) = read_seeds(_jsonl(tmp_path, native))
    assert (task.kind, task.entry_point, task.tests) == (
        "code",
        "add",
        "assert add(1, 2) == 3\nassert add(0, 0) == 0",
    )
    # asserts that call two functions (builtins aside) do not settle it: the entry point is asked for
    two = {**native, "tests": ["assert sorted(add(1, 2)) == sub(3, 0)"]}
    with pytest.raises(SeedError, match="field 'entry_point' is missing"):
        read_seeds(_jsonl(tmp_path, two))


@pytest.mark.parametrize(
    "tests",
    [
        "def test_add():\n    assert add(1, 2) == 3\n",
        "import unittest\n\nclass TestAdd(unittest.TestCase):\n    def test_it(self):\n        self.assertEqual(add(1, 2), 3)\n",
        "class TestAdd:\n    def test_it(self):\n        assert add(1, 2) == 3\n",
        'import doctest\n\ndef _examples():\n    """\n    >>> add(1, 2)\n    3\n    """\n\nassert doctest.testmod().failed == 0\n',
    ],
    ids=["pytest-style", "unittest", "pytest-class", "doctest"],
)
def test_test_functions_and_test_cases_are_code_seeds(tmp_path: Path, tests: str) -> None:
    # the execution harness calls them (tests/filters/test_graded_execution.py runs them)
    (task,) = read_seeds(_jsonl(tmp_path, {**CODE, "tests": tests}))
    assert task.kind == "code" and task.tests == tests


def test_alpaca_style_empty_input_means_no_context(tmp_path: Path) -> None:
    tasks = read_seeds(_jsonl(tmp_path, {"instruction": "Say hi.", "input": "", "response": "Hi"}))
    assert tasks[0].input is None


def test_parquet_seeds(tmp_path: Path) -> None:
    path = tmp_path / "seeds.parquet"
    pq.write_table(pa.table({"instruction": ["a?", "b?"], "response": ["A", None]}), path)
    tasks = read_seeds(path)
    assert [t.response for t in tasks] == ["A", None]
    pq.write_table(pa.table({"instruction": ["a?"], "prompt": ["x"]}), path)
    with pytest.raises(SeedError, match=r"seeds.parquet: unknown column 'prompt'"):
        read_seeds(path)


def test_a_folder_of_seed_files(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps({"instruction": "one"}) + "\n")
    (tmp_path / "b.jsonl").write_text(json.dumps({"instruction": "two"}) + "\n")
    (tmp_path / "NOTES.md").write_text("not a seed file")
    assert [t.instruction for t in read_seeds(tmp_path)] == ["one", "two"]


@pytest.mark.parametrize(
    ("rows", "raw", "message"),
    [
        (['{"instruction": "ok"}', '{"instruction": "broken"'], None, r"seeds.jsonl:2: not valid JSON"),
        (
            None,
            b'{"instruction": "ok"}\n{"instruction": "caf\xe9"}\n',
            r"seeds.jsonl:2: not valid UTF-8 \(byte 0xe9",
        ),
        ([{"instruction": "   "}], None, r"seeds.jsonl:1: field 'instruction' is empty"),
        ([{"response": "orphan"}], None, r"seeds.jsonl:1: field 'instruction' is missing"),
        ([{"instruction": 42}], None, r"field 'instruction' must be text, got number"),
        (
            [{"instruction": "x" * 1_048_576}],
            None,
            r"field 'instruction' is 1,048,576 characters, over the 100,000",
        ),
        (
            [{"instruction": "a"}, {"instruction": "a"}],
            None,
            r"seeds.jsonl:2: duplicate seed: same content as .*:1",
        ),
        (
            [{"id": "x", "instruction": "a"}, {"id": "x", "instruction": "b"}],
            None,
            r":2: duplicate seed id 'x'",
        ),
        ([{"instruction": "a", "output": "b"}], None, r"unknown field 'output'; allowed: id, instruction"),
        ([{"instruction": "a", "kind": "chat"}], None, r"field 'kind' is 'chat'; allowed: sft, code"),
        (["[1, 2]"], None, r"expected a JSON object per line, got array"),
        ([{**CODE, "tests": "assert True"}], None, r"neither defines check\(candidate\)"),
        (
            [{**CODE, "tests": "def test_it(f):\n    assert f(1)\n"}],  # takes an argument: never called
            None,
            r"neither defines check\(candidate\) \(HumanEval-style\), nor asserts on",
        ),
        ([{**CODE, "tests": "def check(:"}], None, r"field 'tests' is not valid Python"),
        (
            [{**CODE, "entry_point": "not a name"}],
            None,
            r"'entry_point' is 'not a name', not a Python function",
        ),
        ([{k: v for k, v in CODE.items() if k != "tests"}], None, r"field 'tests' is missing"),
        (
            [{"instruction": "a", "kind": "sft", "tests": "def check(c): pass"}],
            None,
            r"only belongs to code seeds",
        ),
        # tests without a kind make a code seed, which then needs its entry point
        ([{"instruction": "a", "tests": "def check(c): pass"}], None, r"field 'entry_point' is missing"),
        (['{"instruction": "\\ud800"}'], None, r"unpaired surrogate"),
        ([""], None, r"holds no seed tasks"),
    ],
)
def test_bad_seeds_are_one_clear_error(
    tmp_path: Path, rows: list[object] | None, raw: bytes | None, message: str
) -> None:
    path = _jsonl(tmp_path, *(rows or []), raw=raw)
    with pytest.raises(SeedError, match=message):
        read_seeds(path)


def test_missing_path_and_wrong_suffix(tmp_path: Path) -> None:
    with pytest.raises(SeedError, match="does not exist"):
        read_seeds(tmp_path / "nope.jsonl")
    csv = tmp_path / "seeds.csv"
    csv.write_text("instruction\nhi\n")
    with pytest.raises(SeedError, match=r"unsupported seed file type '.csv'"):
        read_seeds(csv)


def test_field_limit_is_configurable(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, {"instruction": "x" * 200})
    assert read_seeds(path, max_field_chars=500)
    with pytest.raises(SeedError, match="over the 100 limit"):
        read_seeds(path, max_field_chars=100)
