"""Writes ``schema_v1/``: two dataset versions published by the code of schema 1 (commit e23a69f).

Run once, against that commit's tree, not today's (the point is bytes written by the old code):

    git archive e23a69f | tar -x -C /tmp/v1tree
    PYTHONPATH=/tmp/v1tree .venv/bin/python tests/agent/data/make_schema_v1.py
"""

import shutil
import tempfile
from pathlib import Path

from ptfactory.storage.schema import SAMPLE_SCHEMA, from_records, sample_id
from ptfactory.storage.versions import DatasetStore

assert SAMPLE_SCHEMA.metadata[b"ptfactory.schema"] == b"sample/1", "run this against schema 1's code"
OUT = Path(__file__).parent / "schema_v1"


def turns(*pairs: str) -> list[dict[str, str]]:
    return [{"role": r, "content": c} for r, c in zip(pairs[::2], pairs[1::2], strict=True)]


sft = [
    turns("user", "What is 2 + 3?", "assistant", "2 + 3 = 5."),
    turns("system", "Be brief.", "user", "Name a prime.", "assistant", "7"),
    turns("user", "Say hi in French.", "assistant", "Bonjour !"),
]
rows = [
    {"sample_id": sample_id("sft", m), "batch": "b1", "kind": "sft", "messages": m, "decisions": []}
    for m in sft
]
prompt = turns("user", "Pick the better haiku.")
chosen, rejected = turns("assistant", "Old pond, frog jumps in."), turns("assistant", "a b c")
pairs = [
    {
        "sample_id": sample_id("preference", prompt, chosen=chosen, rejected=rejected),
        "batch": "b1",
        "kind": "preference",
        "messages": prompt,
        "chosen": chosen,
        "rejected": rejected,
        "decisions": [],
    }
]
with tempfile.TemporaryDirectory() as home:
    store = DatasetStore(home)
    store.publish("v1-sft", from_records(rows), kind="sft", config_hash="schema-v1")
    store.publish("v1-pairs", from_records(pairs), kind="preference", config_hash="schema-v1")
    shutil.rmtree(OUT, ignore_errors=True)
    shutil.copytree(Path(home) / "datasets", OUT / "datasets")
print(f"wrote {OUT}")
