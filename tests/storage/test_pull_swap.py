"""``ptf pull --force`` over an earlier pull, as a user runs it: the folder holds exactly one
version, or the earlier pull untouched, whatever fails (issue 39 item 3). Shard names repeat across
versions, so a pull that wrote in place left a corrupt or killed pull's first shards over the old
version's, under the old receipt; the version is now staged beside the folder and swapped in whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from ptfactory.storage.seams import SEAM_ENV
from ptfactory.storage.versions import DatasetStore
from tests.conftest import PTF, make_rows

Ptf = Callable[..., subprocess.CompletedProcess[str]]


def _versions(home: Path) -> DatasetStore:
    """sft v1 and v2 of 80 rows each (no row shared), 8 shards each: the same shard names."""
    store = DatasetStore(str(home))
    store.publish("sft", make_rows(80), kind="sft", config_hash="c", shard_rows=10)
    store.publish("sft", make_rows(80, start=1000), kind="sft", config_hash="c", shard_rows=10)
    files = [[s.file for s in store.manifest("sft", v).shards] for v in (1, 2)]
    assert files[0] == files[1] and len(files[0]) >= 4  # the premise: names repeat
    return store


def _snapshot(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _whole_version(folder: Path, store: DatasetStore) -> int:
    """The version ``folder`` holds whole (its shards, sha256 as its manifest says, card, manifest,
    receipt and nothing else); fails on anything else, such as a mix of two versions."""
    receipt = json.loads((folder / "ptf_pull.json").read_text())
    manifest = store.manifest("sft", receipt["version"])
    held = _snapshot(folder)
    assert set(held) == {s.file for s in manifest.shards} | {"README.md", "manifest.json", "ptf_pull.json"}
    assert {s.file: s.sha256 for s in manifest.shards} == {f: held[f] for f in held if f.endswith(".parquet")}
    source = Path(store.version_dir("sft", manifest.version)) / "manifest.json"
    assert (folder / "manifest.json").read_bytes() == source.read_bytes()
    assert receipt["manifest_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    return manifest.version


def _leftovers(folder: Path) -> list[str]:
    return sorted(
        p.name
        for p in folder.parent.iterdir()
        if p.name.startswith(f".{folder.name}.ptf-pull-") and p.is_dir()
    )


def test_a_corrupt_shard_leaves_the_earlier_pull_exactly(ptf: Ptf, tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = _versions(home)
    env = {"PTF_HOME": str(home)}
    out = tmp_path / "data" / "sft"
    first = ptf("pull", "sft@v1", "--to", str(out), env=env)
    assert first.returncode == 0, first.stderr
    before = _snapshot(out)
    assert _whole_version(out, store) == 1
    # v2's second shard rots on the store
    bad = Path(store.version_dir("sft", 2)) / "part-00001.parquet"
    data = bytearray(bad.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))

    failed = ptf("pull", "sft@v2", "--to", str(out), "--force", env=env)
    assert failed.returncode != 0 and "part-00001.parquet is corrupt" in failed.stderr, failed.stderr
    assert _snapshot(out) == before  # v1 exactly, with its receipt: not one file of v2
    assert _whole_version(out, store) == 1
    assert _leftovers(out) == []  # the failed pull removed what it staged


def test_a_pull_killed_anywhere_leaves_one_whole_version_and_a_rerun_completes(
    ptf: Ptf, project: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    store = _versions(home)
    env = {k: v for k, v in os.environ.items() if k not in ("PTF_HOME", "DAGSTER_HOME")}
    env.update({"PTF_HOME": str(home), "NO_COLOR": "1"})
    out = tmp_path / "data" / "sft"
    assert ptf("pull", "sft@v1", "--to", str(out), env={"PTF_HOME": str(home)}).returncode == 0

    # killed while copying (the first shard staged), before the swap, and just after it
    for point, held in (("pull:copied:1", 1), ("pull:staged", 1), ("pull:swapped", 2)):
        seam = tmp_path / "seam" / point.replace(":", "-")
        child = subprocess.Popen(
            [*PTF, "pull", "sft@v2", "--to", str(out), "--force"],
            cwd=project,
            env={**env, SEAM_ENV: json.dumps({"point": point, "dir": str(seam)})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 120
        while not list(seam.glob("arrived-*")):
            assert child.poll() is None, f"the pull ended ({child.returncode}) before {point}"
            assert time.monotonic() < deadline, f"the pull never reached {point}"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
        assert _whole_version(out, store) == held, point
    assert _leftovers(out)  # the killed pulls' staging (after the swap: the earlier pull) is beside

    rerun = ptf("pull", "sft@v2", "--to", str(out), "--force", env={"PTF_HOME": str(home)})
    assert rerun.returncode == 0, rerun.stderr
    assert _whole_version(out, store) == 2
    assert _leftovers(out) == []  # the next pull cleaned them
