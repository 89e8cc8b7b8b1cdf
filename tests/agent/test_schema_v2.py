"""Sample schema 2: tool calls in messages, agent columns, step labels; schema-1 versions (written by
the schema-1 code: tests/agent/data/make_schema_v1.py) read unchanged, ids included; the bundled
SmolLM2's tool-aware chat template; ``to_trl`` keeps tool calls."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from ptfactory.errors import SchemaError
from ptfactory.storage.pull import pull
from ptfactory.storage.schema import (
    MESSAGE_V1,
    SAMPLE_SCHEMA,
    SCHEMA_VERSION,
    conform,
    from_records,
    row_texts,
    sample_id,
    validate_table,
)
from ptfactory.storage.versions import DatasetStore
from ptfactory.training.data import to_trl
from ptfactory.training.templates import template_problems

V1 = Path(__file__).parent / "data" / "schema_v1"
TOOLS = json.dumps(
    [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}]
)


def _call(command: str, call_id: str = "call_0") -> dict[str, Any]:
    arguments = json.dumps({"command": command})
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": arguments}}


def agent_messages(command: str = "ls") -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "Solve it."},
        {"role": "user", "content": "Fix the tests."},
        {"role": "assistant", "content": "", "tool_calls": [_call(command)]},
        {"role": "tool", "content": "exit code 0\ncalc.py", "tool_call_id": "call_0", "name": "bash"},
        {"role": "assistant", "content": "Fixed."},
    ]


def agent_row(command: str = "ls", **extra: Any) -> dict[str, Any]:
    messages = agent_messages(command)
    return {
        "sample_id": sample_id("agent", messages, tools=TOOLS),
        "batch": "b1",
        "kind": "agent",
        "messages": messages,
        "tools": TOOLS,
        "steps": [{"index": 0, "kind": "tool", "name": "bash", "exit_code": 0}],
        "outcome": {"task_id": "t", "rollout": 0, "solved": True, "n_steps": 1, "task": "{}"},
        **extra,
    }


@pytest.fixture
def v1_home(tmp_path: Path) -> Path:
    shutil.copytree(V1 / "datasets", tmp_path / "datasets")
    return tmp_path


def test_schema_1_versions_read_unchanged_with_their_ids(v1_home: Path, tmp_path: Path) -> None:
    datasets = DatasetStore(str(v1_home))
    table = datasets.read("v1-sft@v1", verify=True)
    assert table.schema.metadata[b"ptfactory.schema"] == b"sample/1"  # the old bytes, as written
    assert table.schema.field("messages").type.value_type == MESSAGE_V1
    rows = table.to_pylist()
    # ids were computed by schema 1's code; today's sample_id gives the same for the same content
    assert [r["sample_id"] for r in rows] == [sample_id("sft", r["messages"]) for r in rows]
    lifted = conform(table)  # what every stage does: the new columns null, the ids untouched
    validate_table(lifted)
    assert lifted.schema == SAMPLE_SCHEMA and lifted.column("sample_id").equals(table.column("sample_id"))
    assert lifted.column("tools").null_count == 3 and lifted.column("step_labels").null_count == 3
    assert [sample_id("sft", m) for m in lifted.column("messages").to_pylist()] == [
        r["sample_id"] for r in rows
    ]
    pair = datasets.read("v1-pairs@v1").to_pylist()[0]
    assert pair["sample_id"] == sample_id(
        "preference", pair["messages"], chosen=pair["chosen"], rejected=pair["rejected"]
    )
    # what a trainer and `ptf pull` read of it is what they read before schema 2
    assert to_trl(rows, "sft")[0] == {
        "messages": [{"role": m["role"], "content": m["content"]} for m in rows[0]["messages"]]
    }
    assert to_trl([pair], "dpo")[0]["chosen"] == [
        {"role": "assistant", "content": pair["chosen"][-1]["content"]}
    ]
    receipt = pull(datasets, "v1-sft@v1", tmp_path / "pulled", force=False)
    assert receipt.manifest.rows == 3 and len(receipt.files) == 1


def test_a_version_on_a_schema_1_parent_is_written_in_schema_2(v1_home: Path) -> None:
    datasets = DatasetStore(str(v1_home))
    old = conform(datasets.read("v1-sft@v1"))
    new = pa.concat_tables([old, from_records([agent_row()])])
    manifest = datasets.publish("v1-sft", new, kind="sft", config_hash="schema-v2").manifest
    assert manifest.version == 2 and manifest.rows == 4
    read = datasets.read("v1-sft@v2")
    assert read.schema.metadata[b"ptfactory.schema"] == f"sample/{SCHEMA_VERSION}".encode()
    assert set(read.column("sample_id").to_pylist()) >= set(old.column("sample_id").to_pylist())


def test_sample_id_hashes_tool_calls_and_tools() -> None:
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    nulls = [{**m, "tool_calls": None, "tool_call_id": None, "name": None} for m in plain]
    assert sample_id("sft", plain) == sample_id("sft", nulls)  # a schema-1 row, read as schema 2
    assert sample_id("agent", agent_messages("ls"), tools=TOOLS) != sample_id(
        "agent", agent_messages("ls -a"), tools=TOOLS
    )  # differs only in a call's arguments
    assert sample_id("agent", agent_messages(), tools=TOOLS) != sample_id("agent", agent_messages())


def test_agent_rows_validate_and_bad_ones_name_the_field() -> None:
    good = agent_row(step_labels=[{"step": 0, "label": "first_error", "annotator": "ann@x"}])
    table = from_records([good])
    validate_table(table)
    assert "bash" in row_texts(table)[0].as_py() and "ls" in row_texts(table)[0].as_py()
    with pytest.raises(SchemaError, match="field 'tools' is empty"):
        validate_table(from_records([{**good, "tools": None}]))
    with pytest.raises(SchemaError, match="field 'outcome' is empty"):
        validate_table(from_records([{**good, "outcome": None}]))
    orphan = [*good["messages"][:3], {"role": "tool", "content": "x", "tool_call_id": None}]
    with pytest.raises(SchemaError, match="tool turn with no 'tool_call_id'"):
        validate_table(from_records([{**good, "messages": orphan}]))
    with pytest.raises(
        SchemaError, match=r"step label .* names no step of the row or has no label; steps are 0..0"
    ):
        validate_table(from_records([{**good, "step_labels": [{"step": 3, "label": "x", "annotator": "a"}]}]))


def test_bundled_template_renders_tool_calls_and_plain_chats_as_before(smollm2: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(smollm2), local_files_only=True)
    plain = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    assert tokenizer.apply_chat_template(plain, tokenize=False) == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n"
    )  # SmolLM2's own rendering, unchanged
    rows = to_trl([agent_row("grep -rn 'x y'")], "sft")
    text = tokenizer.apply_chat_template(
        rows[0]["messages"], tools=json.loads(rows[0]["tools"]), tokenize=False
    )
    assert '<tools>\n{"type": "function", "function": {"name": "bash"' in text
    assert (
        '<|im_start|>assistant\n{"name": "bash", "arguments": {"command": "grep -rn \'x y\'"}}<|im_end|>'
        in text
    )
    assert "<tool_response>\nexit code 0\ncalc.py\n</tool_response>" in text
    assert template_problems([agent_row()], tokenizer) == []
    # a template that ignores tool_calls loses the call: the audit says so
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    )
    failed = agent_row(messages=agent_messages()[:3])
    assert "lost a tool call" in template_problems([failed], tokenizer)[0]


def test_to_trl_keeps_tool_calls_for_agent_rows() -> None:
    plain = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}
    rows = to_trl([agent_row(), plain], "sft")
    assert rows[0]["tools"] == TOOLS and rows[1]["tools"] is None
    call = rows[0]["messages"][2]
    assert call["tool_calls"][0]["function"]["arguments"] == '{"command": "ls"}'
    assert rows[0]["messages"][3]["tool_call_id"] == "call_0" and rows[0]["messages"][3]["role"] == "tool"
    assert set(rows[1]["messages"][0]) == set(call)  # one Arrow type for every row's turns
    assert to_trl([plain], "sft") == [{"messages": plain["messages"]}]
