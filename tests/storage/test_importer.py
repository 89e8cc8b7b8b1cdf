import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ptfactory.errors import UserInputError
from ptfactory.storage.importer import detect_shape, import_table, read_file
from ptfactory.storage.schema import SAMPLE_SCHEMA, sample_id, validate_table


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A row with its turns as {role, content}: schema 2's tool-call fields are null on plain turns."""
    return {
        k: [{"role": m["role"], "content": m["content"]} for m in v]
        if k in ("messages", "chosen", "rejected") and v
        else v
        for k, v in row.items()
    }


def _chat(question: str, answer: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


def test_trl_sft_parquet_becomes_sample_records(tmp_path: Path) -> None:
    path = tmp_path / "chats.parquet"
    pq.write_table(
        pa.table({"messages": [_chat("Hi", "Hello!"), _chat("2+2?", "4")], "source": ["a", "b"]}), path
    )
    table, kind = import_table(read_file(path), None, path.name, batch="import-abc")
    assert kind == "sft" and table.schema.equals(SAMPLE_SCHEMA)
    validate_table(table)
    first = table.to_pylist()[0]
    assert first["sample_id"] == sample_id("sft", _chat("Hi", "Hello!"))
    assert first["batch"] == "import-abc" and first["kind"] == "sft"
    assert (
        first["provenance"]["method"] == "import" and first["provenance"]["seed_task_id"] == "chats.parquet#1"
    )
    assert first["provenance"]["code_version"]
    assert first["decisions"] == [
        {"stage": "import", "verdict": "keep", "reason": "imported", "detail": "chats.parquet row 1"}
    ]
    assert detect_shape(table.column_names).name == "records"
    assert detect_shape(["messages", "source"]).ignored == ("source",)


def test_trl_preference_jsonl_with_text_and_message_prompts(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "prefs.jsonl",
        [
            {"prompt": "Name a colour.", "chosen": "Blue.", "rejected": "Seven."},
            {
                "prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}],
                "chosen": [{"role": "assistant", "content": "Hi."}],
                "rejected": [{"role": "assistant", "content": "Good day to you, dear friend."}],
            },
        ],
    )
    table, kind = import_table(read_file(path), None, path.name)
    assert kind == "preference"
    text, turns = (_plain(r) for r in table.to_pylist())
    assert text["messages"] == [{"role": "user", "content": "Name a colour."}]
    assert text["chosen"] == [{"role": "assistant", "content": "Blue."}]
    assert text["rejected"] == [{"role": "assistant", "content": "Seven."}]
    assert text["sample_id"] == sample_id(
        "preference", text["messages"], chosen=text["chosen"], rejected=text["rejected"]
    )
    assert [m["role"] for m in turns["messages"]] == ["system", "user"]
    assert text["batch"] == turns["batch"] and text["batch"].startswith("import-")
    assert {r["kind"] for r in (text, turns)} == {"preference"}


def test_implicit_prompt_and_prompt_completion_shapes() -> None:
    implicit, kind = import_table(
        [{"chosen": _chat("Q?", "Good."), "rejected": _chat("Q?", "Bad.")}], None, "hh.jsonl"
    )
    row = _plain(implicit.to_pylist()[0])
    assert kind == "preference" and row["messages"] == [{"role": "user", "content": "Q?"}]
    assert row["chosen"] == [{"role": "assistant", "content": "Good."}]
    completions, kind = import_table([{"prompt": "Q?", "completion": "A."}], None, "pc.jsonl")
    assert kind == "sft" and _plain(completions.to_pylist()[0])["messages"] == _chat("Q?", "A.")


def test_full_records_keep_their_ids_batches_and_trail(rows: Callable[..., pa.Table]) -> None:
    given = rows(3, "b7")
    table, kind = import_table(given, None, "export.parquet")
    assert kind == "sft"
    assert table.column("sample_id").to_pylist() == given.column("sample_id").to_pylist()
    assert set(table.column("batch").to_pylist()) == {"b7"}
    first = table.to_pylist()[0]
    assert first["provenance"]["method"] == "import" and first["provenance"]["seed_task_id"] == "t0"
    assert [d["stage"] for d in first["decisions"]] == ["seed", "import"]
    assert first["decisions"][-1]["detail"] == "export.parquet row 1; method was test"
    # records without ids or batches get them
    bare, _ = import_table(
        given.drop_columns(["sample_id", "batch"]), "sft", "bare.parquet", batch="import-x"
    )
    assert bare.column("sample_id").to_pylist() == given.column("sample_id").to_pylist()
    assert set(bare.column("batch").to_pylist()) == {"import-x"}


def test_kind_is_told_by_the_columns_and_a_contradiction_is_an_error(rows: Callable[..., pa.Table]) -> None:
    prefs = [{"prompt": "Q?", "chosen": "A", "rejected": "B"}]
    assert import_table(prefs, "preference", "p.jsonl")[1] == "preference"
    with pytest.raises(
        UserInputError, match=r"p.jsonl has preference columns \(prompt, chosen, rejected\) but --kind is sft"
    ):
        import_table(prefs, "sft", "p.jsonl")
    with pytest.raises(UserInputError, match=r"has sft columns \(messages\) but --kind is preference"):
        import_table([{"messages": _chat("Q", "A")}], "preference", "s.jsonl")
    with pytest.raises(UserInputError, match=r"r.parquet, row 1: a sft row in a preference import"):
        import_table(rows(2), "preference", "r.parquet")
    with pytest.raises(UserInputError, match=r"--kind 'code': allowed: sft, preference"):
        import_table(prefs, "code", "p.jsonl")


def test_a_table_of_no_accepted_shape_names_its_columns() -> None:
    with pytest.raises(UserInputError) as caught:
        import_table(pa.table({"question": ["Q"], "answer": ["A"]}), None, "qa.parquet")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "qa.parquet fits no accepted shape: its columns are question, answer; accepted:"
    )
    assert "`messages`" in message and "`prompt`+`chosen`+`rejected`" in message


@pytest.mark.parametrize(
    ("row", "why"),
    [
        (
            {"messages": [{"role": "user", "content": "Q"}, {"role": "assistant"}]},
            r"messages\[1\] \(assistant\) has no content",
        ),
        (
            {"messages": [{"role": "robot", "content": "Q"}]},
            r"messages\[0\] has role 'robot'; allowed: system, user, assistant",
        ),
        (
            {"messages": [{"role": "user", "content": 4}]},
            r"messages\[0\] \(user\) has content of type int; expected text",
        ),
        ({"messages": [{"role": "user", "content": "Q"}]}, r"'messages' ends with a user turn"),
        ({"messages": "just text"}, r"'messages' is a str; expected a list"),
        ({"messages": [{"role": "user", "content": "Q", "tool_calls": [1]}]}, r"has field 'tool_calls'"),
        (
            {"prompt": "Q", "chosen": [{"role": "user", "content": "A"}], "rejected": "B"},
            r"chosen\[0\] has role 'user'; 'chosen' holds assistant messages only",
        ),
        ({"prompt": "Q", "chosen": "A", "rejected": "A"}, r"'chosen' and 'rejected' are the same answer"),
        ({"prompt": None, "chosen": "A", "rejected": "B"}, r"'prompt' is empty"),
    ],
)
def test_a_bad_row_is_named_by_its_number(row: dict[str, Any], why: str) -> None:
    good = (
        {"prompt": "Fine?", "chosen": "Yes.", "rejected": "No."}
        if "prompt" in row
        else {"messages": _chat("Q", "A")}
    )
    with pytest.raises(UserInputError, match=rf"^bad.jsonl, row 2: .*{why}"):
        import_table([good, row], None, "bad.jsonl")


def test_duplicate_rows_are_kept_once() -> None:
    table, _ = import_table(
        [{"messages": _chat("Q", "A")}] * 3 + [{"messages": _chat("Q2", "A")}], None, "d.jsonl"
    )
    assert table.num_rows == 2
    assert table.column("provenance").to_pylist()[0]["seed_task_id"] == "d.jsonl#1"  # the first copy


def test_read_file_reads_jsonl_rows_and_refuses_other_files(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"messages": []}\n\n{oops\n')
    with pytest.raises(UserInputError, match=r"bad.jsonl:3: not valid JSON"):
        read_file(tmp_path / "bad.jsonl")
    (tmp_path / "data.csv").write_text("a,b\n")
    with pytest.raises(UserInputError, match=r"reads .parquet or .jsonl files, not '.csv'"):
        read_file(tmp_path / "data.csv")
    with pytest.raises(UserInputError, match=r"no such file"):
        read_file(tmp_path / "missing.parquet")
