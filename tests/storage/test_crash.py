"""``kill -9`` in the middle of a publish leaves no visible partial version; the next one succeeds."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ptfactory.storage.versions import DatasetStore

CHILD = """
import os, sys
sys.path.insert(0, {repo!r})
from tests.conftest import make_rows
from ptfactory.storage.versions import DatasetStore
import pyarrow as pa
table = pa.concat_tables([make_rows(1000, start=i * 1000) for i in range(20)])
print("ready", flush=True)
DatasetStore().publish("sft", table, kind="sft", config_hash="c", shard_rows=50)
print("published", flush=True)
"""


def _wait_for(predicate: object, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_kill_9_mid_publish_leaves_nothing_visible(home: Path) -> None:
    repo = str(Path(__file__).resolve().parents[2])
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(repo=repo)],
        env={**os.environ, "PTF_HOME": str(home)},
        stdout=subprocess.PIPE,
        text=True,
    )
    base = home / "datasets" / "sft"

    def shards_being_written() -> bool:
        temps = [p for p in base.glob(".tmp-v1-*") if p.is_dir()] if base.exists() else []
        return any(len(list(t.glob("part-*.parquet"))) >= 5 for t in temps)

    _wait_for(shards_being_written)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL

    store = DatasetStore()
    assert store.versions("sft") == []
    assert not (base / "v1").exists()
    assert list(base.glob(".tmp-v1-*")), "the dead publisher's temp dir is still there, but hidden"
    assert store.catalog.known_versions() == set()

    from tests.conftest import make_rows

    result = store.publish("sft", make_rows(30), kind="sft", config_hash="c")
    assert result.manifest.version == 1
    assert store.verify("sft@v1").rows == 30
    assert not list(base.glob(".tmp-*")), "the next publish cleans up after the dead one"
