"""Publishing on object storage, against a real S3 API server (moto, 127.0.0.1): conditional commits,
racing publishers, a publisher killed mid-publish, a reader during a commit, pull and load_dataset.

Children are separate processes (spawned), each with its own local state folder, like two machines.
They stop at named points through the test seam ``PTF_TEST_PUBLISH_SEAM`` (storage.commit.seam).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pytest
import yaml

from ptfactory.errors import PublishError
from ptfactory.storage.audit import Audit, AuditFailed, CheckResult, Staged
from ptfactory.storage.commit import SEAM_ENV
from ptfactory.storage.delta import DeltaRequest
from ptfactory.storage.fs import parquet_from_bytes
from ptfactory.storage.gc import collect_garbage, parse_grace
from ptfactory.storage.manifest import Manifest
from ptfactory.storage.versions import DatasetStore
from tests.conftest import PTF, make_rows
from tests.storage.conftest import keys, s3_client

pytestmark = pytest.mark.integration

_SPAWN = multiprocessing.get_context("spawn")
_WAIT_S = 60.0


def _table(tag: int, rows: int = 6) -> pa.Table:
    return make_rows(rows, batch=f"b{tag}", start=tag * 1000)


def _splits(tag: int) -> dict[str, pa.Table]:
    return {"train": make_rows(6, start=tag * 1000), "validation": make_rows(3, start=tag * 1000 + 500)}


def _ids(table: pa.Table) -> set[str]:
    return set(table.column("sample_id").to_pylist())


def _seam(point: str, folder: Path, **extra: Any) -> str:
    return json.dumps({"point": point, "dir": str(folder), **extra})


def _wait_for(condition: Any, what: str, child: Any = None) -> None:
    deadline = time.monotonic() + _WAIT_S
    while not condition():
        if child is not None and not child.is_alive():
            raise AssertionError(f"the publisher exited ({child.exitcode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _assert_committed_versions_whole(home: str, name: str) -> dict[int, tuple[Manifest, set[str]]]:
    """Every committed vN/ holds exactly its manifest's shards (sha256 and rows as recorded), the card
    and the manifest; returns each version's manifest and sample ids. An uncommitted vN/ (no manifest)
    is not a version."""
    store = DatasetStore(home)
    fs = fsspec.filesystem("s3")
    held: dict[str, set[str]] = {}
    for key in keys(home, f"datasets/{name}/v"):
        folder, _, file = key.removeprefix(f"datasets/{name}/").partition("/")
        held.setdefault(folder, set()).add(file)
    found = {}
    for version in store.versions(name):
        manifest = store.manifest(name, version)
        assert held[f"v{version}"] == {s.file for s in manifest.shards} | {"README.md", "manifest.json"}
        ids: set[str] = set()
        for shard in manifest.shards:
            data = fs.cat_file(f"{home}/datasets/{name}/v{version}/{shard.file}")
            assert (hashlib.sha256(data).hexdigest(), len(data)) == (shard.sha256, shard.bytes)
            table = parquet_from_bytes(data)
            assert table.num_rows == shard.rows
            ids |= _ids(table)
        assert len(ids) == manifest.rows
        found[version] = (manifest, ids)
    return found


def test_the_server_honours_conditional_creates(s3_endpoint: str) -> None:
    """What every commit here rests on: a second PutObject with If-None-Match: * of a key fails (412)."""
    import botocore.exceptions

    client, bucket = s3_client(), f"ptf-conditional-{os.getpid()}"
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key="k", Body=b"first", IfNoneMatch="*")
    with pytest.raises(botocore.exceptions.ClientError) as caught:
        client.put_object(Bucket=bucket, Key="k", Body=b"second", IfNoneMatch="*")
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert caught.value.response["Error"]["Code"] == "PreconditionFailed"
    assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"first"


def test_publish_stages_claims_and_commits_with_nothing_left_over(s3_home: str) -> None:
    store = DatasetStore()
    first = store.publish("sft", _splits(1), kind="sft", config_hash="c1", shard_rows=3)
    assert first.path == f"{s3_home}/datasets/sft/v1"
    assert keys(s3_home) == [
        "datasets/sft/.claims/v1.json",
        "datasets/sft/v1/README.md",
        "datasets/sft/v1/manifest.json",
        "datasets/sft/v1/train-00000.parquet",
        "datasets/sft/v1/train-00001.parquet",
        "datasets/sft/v1/validation-00000.parquet",
    ]
    claim = json.loads(fsspec.filesystem("s3").cat_file(f"{s3_home}/datasets/sft/.claims/v1.json"))
    assert {"attempt", "host", "pid", "at", "version"} <= set(claim)
    assert store.publish("sft", _splits(1), kind="sft", config_hash="c1", shard_rows=3).created is False
    second = store.publish("sft", _splits(2), kind="sft", config_hash="c2", shard_rows=3)
    assert (second.manifest.version, second.manifest.parent) == (2, 1)
    assert (second.manifest.rows_added, second.manifest.rows_removed) == (9, 9)
    assert not keys(s3_home, "datasets/sft/.staging")
    _assert_committed_versions_whole(s3_home, "sft")
    assert store.read("sft@latest", split="validation").num_rows == 3


def test_a_failed_publish_or_a_refused_audit_leaves_nothing(
    s3_home: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DatasetStore()
    store.publish("sft", _table(1), kind="sft", config_hash="c1", shard_rows=3)
    before = keys(s3_home)

    def refuse(staged: Staged) -> CheckResult:
        return CheckResult("always_refuses", False, detail={"rows": staged.table.num_rows})

    with pytest.raises(AuditFailed, match="always_refuses"):
        store.publish("sft", _table(2), kind="sft", config_hash="c2", shard_rows=3, audit=Audit([refuse]))
    assert keys(s3_home) == before
    # an exception after the claim, with one shard already copied into v2/
    monkeypatch.setenv(SEAM_ENV, _seam("copied:1", tmp_path / "seam", **{"raise": True}))
    with pytest.raises(PublishError, match="on purpose at copied:1"):
        store.publish("sft", _table(2), kind="sft", config_hash="c2", shard_rows=3)
    assert keys(s3_home) == before  # no staging, no partial v2/, no claim
    monkeypatch.delenv(SEAM_ENV)
    assert store.publish("sft", _table(2), kind="sft", config_hash="c2", shard_rows=3).manifest.version == 2


def _race_worker(home: str, state: str, worker: int, rounds: int, barriers: str) -> None:
    os.chdir(state)  # its own local state (catalog): another machine
    from ptfactory.storage.commit import SEAM_ENV
    from ptfactory.storage.versions import DatasetStore
    from tests.conftest import make_rows

    store = DatasetStore(home)
    results = []
    for round_ in range(rounds):
        os.environ[SEAM_ENV] = json.dumps({"point": "staged", "dir": f"{barriers}/{round_}", "parties": 2})
        table = make_rows(6, batch=f"r{round_}", start=(round_ * 2 + worker) * 100)
        result = store.publish("race", table, kind="sft", config_hash=f"r{round_}w{worker}", shard_rows=3)
        results.append({"round": round_, "version": result.manifest.version, "config": f"r{round_}w{worker}"})
    Path(state, "results.json").write_text(json.dumps(results))


def test_two_publishers_racing_for_each_version_get_one_each(s3_home: str, tmp_path: Path) -> None:
    """20 rounds: both publishers stage, meet at a barrier, then claim the same next number; exactly
    one wins it, the other takes the next, and every version is whole."""
    rounds = 20
    children = []
    for worker in (0, 1):
        state = tmp_path / f"machine-{worker}"
        state.mkdir()
        args = (s3_home, str(state), worker, rounds, str(tmp_path / "barriers"))
        children.append(_SPAWN.Process(target=_race_worker, args=args))
    for child in children:
        child.start()
    for child in children:
        child.join(150)
        assert child.exitcode == 0
    results = [
        r for w in (0, 1) for r in json.loads((tmp_path / f"machine-{w}" / "results.json").read_text())
    ]
    versions = sorted(r["version"] for r in results)
    assert versions == list(range(1, 2 * rounds + 1))  # distinct: no version given to both
    for round_ in range(rounds):  # the barrier made each round a real race for the same number
        assert sorted(r["version"] for r in results if r["round"] == round_) == [
            2 * round_ + 1,
            2 * round_ + 2,
        ]
    committed = _assert_committed_versions_whole(s3_home, "race")
    assert sorted(committed) == versions
    for r in results:  # each version holds what the publisher that got it published
        manifest, ids = committed[r["version"]]
        assert manifest.config_hash == r["config"]
        worker = int(r["config"].split("w")[1])
        assert ids == _ids(make_rows(6, batch=f"r{r['round']}", start=(r["round"] * 2 + worker) * 100))
    assert not keys(s3_home, "datasets/race/.staging")
    assert len(keys(s3_home, "datasets/race/.claims/")) == 2 * rounds


def _delta_worker(home: str, state: str, worker: int, rounds: int, barriers: str) -> None:
    os.chdir(state)
    from ptfactory.storage.commit import SEAM_ENV
    from ptfactory.storage.versions import DatasetStore
    from tests.conftest import make_rows

    store = DatasetStore(home)
    versions = []
    for round_ in range(rounds):
        os.environ[SEAM_ENV] = json.dumps({"point": "staged", "dir": f"{barriers}/{round_}", "parties": 2})
        rows = make_rows(2, batch=f"w{worker}", start=10_000 + (round_ * 2 + worker) * 10)
        made = store.publish_delta("race", rows, kind="sft", config_hash="c", shard_rows=3)
        versions.append(made.manifest.version)
    Path(state, "versions.json").write_text(json.dumps(versions))


def test_two_changes_racing_over_one_version_both_land(s3_home: str, tmp_path: Path) -> None:
    """Delta publishes race like whole ones (a barrier after staging, both claim the same number),
    and a change is over its base: the loser of a claim waits for the winner's commit and stages
    again on top of it, so no change is lost and every version is whole."""
    store = DatasetStore()
    base = make_rows(12, batch="base")
    store.publish("race", base, kind="sft", config_hash="c", shard_rows=3)
    rounds = 4
    children = []
    for worker in (0, 1):
        state = tmp_path / f"machine-{worker}"
        state.mkdir()
        args = (s3_home, str(state), worker, rounds, str(tmp_path / "barriers"))
        children.append(_SPAWN.Process(target=_delta_worker, args=args))
    for child in children:
        child.start()
    for child in children:
        child.join(150)
        assert child.exitcode == 0
    got = sorted(
        v for w in (0, 1) for v in json.loads((tmp_path / f"machine-{w}" / "versions.json").read_text())
    )
    assert got == list(range(2, 2 * rounds + 2))  # one version each, none shared
    committed = _assert_committed_versions_whole(s3_home, "race")
    expected = _ids(base)
    for version in range(2, 2 * rounds + 2):
        manifest, ids = committed[version]
        assert manifest.parent == version - 1 and (manifest.rows_added, manifest.rows_removed) == (2, 0)
        assert ids > committed[version - 1][1]  # on top of the version before: nothing lost
    for round_ in range(rounds):
        for worker in (0, 1):
            expected |= _ids(make_rows(2, start=10_000 + (round_ * 2 + worker) * 10))
    assert committed[2 * rounds + 1][1] == expected
    assert not keys(s3_home, "datasets/race/.staging")


def _delta_child(home: str, state: str, seam: str, start: int, change: tuple[str, int] = ("hole", 2)) -> None:
    """Publish a change of ``change`` = (dataset, rows) new rows from ``start``."""
    os.chdir(state)
    os.environ[SEAM_ENV] = seam
    from ptfactory.storage.versions import DatasetStore
    from tests.conftest import make_rows

    name, rows = change
    DatasetStore(home).publish_delta(
        name, make_rows(rows, batch="d", start=start), kind="sft", config_hash="c", shard_rows=3
    )


def test_a_change_staged_in_full_still_goes_on_top_of_a_version_committed_meanwhile(
    s3_home: str, tmp_path: Path
) -> None:
    """A change that alters the layout (here: more buckets) is staged in full, not as a delta, but
    its rows are still its base's plus the change: it must wait for a version claimed below it and
    go on top. CI met one committed beside another over the same base, losing that one's rows."""
    from ptfactory.storage.touched import plan

    store = DatasetStore()
    store.publish("grow", make_rows(6, batch="base"), kind="sft", config_hash="c", shard_rows=3)
    request = DeltaRequest.prepare(
        "grow",
        make_rows(12, start=30_000),
        (),
        **dict.fromkeys(("base", "dagster_run_id", "batches", "stats", "audit", "retraction")),
        kind="sft",
        config_hash="c",
        shard_rows=3,
        force=False,
    )
    base = store.manifest("grow", 1)
    assert plan(request, store.store, base, store.store.path("grow", "v1")) is None  # staged in full
    claims = "datasets/grow/.claims/"
    seam_dir = tmp_path / "seam"
    children = []
    # v2, a 2-row delta, stalls mid-copy; v3, 12 rows over v1, claims while v2 is still pending
    for tag, (seam, claim, rows) in enumerate(((_seam("copied:1", seam_dir), 2, 2), ("", 3, 12))):
        state = tmp_path / f"child-{tag}"
        state.mkdir()
        start = 10_000 + tag * 10_000
        child = _SPAWN.Process(target=_delta_child, args=(s3_home, str(state), seam, start, ("grow", rows)))
        child.start()
        children.append(child)
        _wait_for(lambda c=claim: f"{claims}v{c}.json" in keys(s3_home, claims), f"claim v{claim}", child)
    time.sleep(1.0)  # room for v3 to commit, were it not waiting for v2
    assert "datasets/grow/v3/manifest.json" not in keys(s3_home, "datasets/grow/v3/")
    (seam_dir / "release").touch()
    for child in children:
        child.join(_WAIT_S)
        assert child.exitcode == 0
    committed = _assert_committed_versions_whole(s3_home, "grow")
    assert sorted(committed) == [1, 2, 3]
    manifest, ids = committed[3]
    assert manifest.parent == 2 and (manifest.rows_added, manifest.rows_removed) == (12, 0)
    assert ids > committed[2][1] and len(ids) == 6 + 2 + 12  # v2's rows kept


def test_changes_that_rebase_keep_their_claims_so_the_numbers_have_no_hole(
    s3_home: str, tmp_path: Path
) -> None:
    """A change whose base moved stages again on top of the new one. It keeps its claim while it
    does: had it given the claim back, the next change, already holding the number above, would
    commit there and leave a hole (v3 missing; CI met this as a race in the test above)."""
    store = DatasetStore()
    store.publish("hole", make_rows(6, batch="base"), kind="sft", config_hash="c", shard_rows=3)
    claims = "datasets/hole/.claims/"
    seam_dir = tmp_path / "seam"
    children = []
    # v2 stalls mid-copy; v3 and v4 are changes over v1 that claim while v2 is still pending
    for tag, (seam, claim) in enumerate(((_seam("copied:1", seam_dir), 2), ("", 3), ("", 4))):
        state = tmp_path / f"child-{tag}"
        state.mkdir()
        child = _SPAWN.Process(target=_delta_child, args=(s3_home, str(state), seam, 10_000 + tag * 10))
        child.start()
        children.append(child)
        _wait_for(lambda c=claim: f"{claims}v{c}.json" in keys(s3_home, claims), f"claim v{claim}", child)
    (seam_dir / "release").touch()
    for child in children:
        child.join(_WAIT_S)
        assert child.exitcode == 0
    committed = _assert_committed_versions_whole(s3_home, "hole")
    assert sorted(committed) == [1, 2, 3, 4]
    for version in (2, 3, 4):
        manifest, ids = committed[version]
        assert manifest.parent == version - 1 and (manifest.rows_added, manifest.rows_removed) == (2, 0)
        assert ids > committed[version - 1][1]
    assert len(committed[4][1]) == 6 + 3 * 2
    assert not keys(s3_home, "datasets/hole/.staging")


def _publish_child(home: str, state: str, seam: str, tag: int) -> None:
    os.chdir(state)
    os.environ["PTF_HOME"] = home
    os.environ["PTF_TEST_PUBLISH_SEAM"] = seam
    from ptfactory.storage.versions import DatasetStore
    from tests.conftest import make_rows

    splits = {"train": make_rows(6, start=tag * 1000), "validation": make_rows(3, start=tag * 1000 + 500)}
    DatasetStore().publish("sft", splits, kind="sft", config_hash=f"c{tag}", shard_rows=3)


def _start_child(home: str, tmp_path: Path, seam: str, tag: int) -> Any:
    state = tmp_path / f"child-{tag}"
    state.mkdir()
    child = _SPAWN.Process(target=_publish_child, args=(home, str(state), seam, tag))
    child.start()
    return child


def _ptf(*args: str, home: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PTF_HOME": home, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [*PTF, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    ("point", "left"),
    [
        ("staging:train", {"staging"}),  # killed mid-upload: train shards staged, validation not yet
        ("copied:1", {"staging", "uncommitted"}),  # killed mid-copy: v2 claimed, one shard in v2/
    ],
)
def test_a_publisher_killed_mid_publish_leaves_no_version_and_gc_removes_the_rest(
    s3_home: str, tmp_path: Path, point: str, left: set[str]
) -> None:
    store = DatasetStore()
    store.publish("sft", _splits(1), kind="sft", config_hash="c1", shard_rows=3)
    seam_dir = tmp_path / "seam"
    child = _start_child(s3_home, tmp_path, _seam(point, seam_dir), tag=2)
    _wait_for(lambda: any(seam_dir.glob("arrived-*")), f"the publisher to reach {point}", child)
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)
    child.join(30)
    assert child.exitcode == -signal.SIGKILL

    assert store.versions("sft") == [1]
    assert store.resolve("sft@latest").version == 1
    _assert_committed_versions_whole(s3_home, "sft")
    assert keys(s3_home, "datasets/sft/.staging/")
    if "uncommitted" in left:
        assert keys(s3_home, "datasets/sft/v2/") == ["datasets/sft/v2/train-00000.parquet"]
        assert "datasets/sft/.claims/v2.json" in keys(s3_home)

    later = store.publish("sft", _splits(3), kind="sft", config_hash="c3", shard_rows=3)
    expected_version = 3 if "uncommitted" in left else 2  # a claimed number is never reused
    assert later.manifest.version == expected_version
    assert later.manifest.parent == 1

    assert collect_garbage(store, parse_grace("1h")) == []  # too young to be called abandoned
    dry = _ptf("datasets", "gc", "--grace", "0", "--dry-run", "--json", home=s3_home, cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert {f["kind"] for f in json.loads(dry.stdout)} == left
    assert keys(s3_home, "datasets/sft/.staging/")  # a dry run removes nothing
    collected = _ptf("datasets", "gc", "--grace", "0", home=s3_home, cwd=tmp_path)
    assert collected.returncode == 0, collected.stderr
    assert "removed" in collected.stdout
    assert not keys(s3_home, "datasets/sft/.staging/")
    assert not keys(s3_home, "datasets/sft/v2/") or expected_version == 2
    if "uncommitted" in left:
        assert "datasets/sft/.claims/v2.abandoned.json" in keys(s3_home)
    assert store.versions("sft") == [1, expected_version]
    _assert_committed_versions_whole(s3_home, "sft")
    assert collect_garbage(store, 0) == []


def test_a_reader_sees_the_old_latest_or_the_whole_new_version(s3_home: str, tmp_path: Path) -> None:
    store = DatasetStore()
    store.publish("sft", _splits(1), kind="sft", config_hash="c1", shard_rows=3)
    expected = {1: _ids(_splits(1)["train"]) | _ids(_splits(1)["validation"])}
    expected[2] = _ids(_splits(2)["train"]) | _ids(_splits(2)["validation"])
    seam_dir = tmp_path / "seam"
    child = _start_child(s3_home, tmp_path, _seam("copied:1", seam_dir), tag=2)
    _wait_for(lambda: any(seam_dir.glob("arrived-*")), "the publisher to copy its first shard", child)
    seen = []

    def read_latest() -> int:
        reader = DatasetStore()  # a fresh reader each time, as another process would be
        manifest = reader.resolve("sft@latest")
        table = reader.read(f"sft@v{manifest.version}", verify=True)
        assert _ids(table) == expected[manifest.version]
        seen.append(manifest.version)
        return manifest.version

    for _ in range(3):  # v2 is claimed and half copied: not visible
        assert read_latest() == 1
    (seam_dir / "release").touch()
    _wait_for(lambda: read_latest() == 2, "the new version to become visible")
    child.join(60)
    assert child.exitcode == 0
    assert seen[0] == 1 and seen[-1] == 2 and seen == sorted(seen)  # never back, never a partial one


def test_pull_and_load_dataset_read_a_version_from_the_store(
    s3_home: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DatasetStore()
    manifest = store.publish("sft", _splits(1), kind="sft", config_hash="c1", shard_rows=3).manifest
    pulled = _ptf("pull", "sft@v1", "--to", str(tmp_path / "pulled"), home=s3_home, cwd=tmp_path)
    assert pulled.returncode == 0, pulled.stderr
    held = {p.name for p in (tmp_path / "pulled").iterdir()}
    assert held == {s.file for s in manifest.shards} | {"README.md", "manifest.json", "ptf_pull.json"}
    for shard in manifest.shards:
        assert hashlib.sha256((tmp_path / "pulled" / shard.file).read_bytes()).hexdigest() == shard.sha256

    import datasets

    # datasets' offline mode (the suite runs with HF_DATASETS_OFFLINE=1) refuses every remote URL, the
    # S3 server on 127.0.0.1 too; lift datasets' own flag only (the hub stays offline)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    version_dir = f"{s3_home}/datasets/sft/v1"
    card = fsspec.filesystem("s3").cat_file(f"{version_dir}/README.md").decode()
    front = yaml.safe_load(card.split("---\n")[1])
    data_files = {
        entry["split"]: [f"{version_dir}/{path}" for path in entry["path"]]
        for entry in front["configs"][0]["data_files"]
    }
    cache = str(tmp_path / "hf-cache")
    by_card = datasets.load_dataset("parquet", data_files=data_files, cache_dir=cache)
    assert {split: by_card[split].num_rows for split in by_card} == {"train": 6, "validation": 3}
    assert set(by_card["validation"]["sample_id"]) == _ids(_splits(1)["validation"])
    globbed = datasets.load_dataset(
        "parquet", data_files=f"{version_dir}/*.parquet", split="train", cache_dir=cache
    )
    assert globbed.num_rows == manifest.rows


def test_stores_without_a_conditional_create_refuse_concurrent_publishing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fsspec.implementations.memory import MemoryFileSystem

    class NoConditionalFS(MemoryFileSystem):  # type: ignore[misc]
        """A store like memory:// under another name: nothing ptfactory knows as a conditional create."""

        protocol = "nocond"
        store: dict[str, Any] = {}  # noqa: RUF012
        pseudo_dirs = [""]  # noqa: RUF012

    fsspec.register_implementation("nocond", NoConditionalFS, clobber=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PTF_SINGLE_PUBLISHER", raising=False)
    store = DatasetStore("nocond://home")
    with pytest.raises(PublishError, match="PTF_SINGLE_PUBLISHER=1"):
        store.publish("sft", _table(1), kind="sft", config_hash="c")
    assert not [k for k in NoConditionalFS.store if "/v1/" in k]
    monkeypatch.setenv("PTF_SINGLE_PUBLISHER", "1")
    assert store.publish("sft", _table(1), kind="sft", config_hash="c").manifest.version == 1
    assert store.verify("sft@v1").rows == 6


def test_a_failed_upload_is_discarded_not_completed(s3_home: str) -> None:
    """An exception while writing an object never completes its upload (close() would)."""
    from ptfactory.storage.fs import Store

    store = Store(s3_home)

    def fail_writing(path: str, data: bytes) -> None:
        with store.atomic_writer(path) as handle:
            handle.write(data)
            raise RuntimeError("mid-write")

    path = store.path("assets", "x.bin")
    store.write_bytes_atomic(path, b"old")
    with pytest.raises(RuntimeError, match="mid-write"):
        fail_writing(path, b"new, half")
    assert store.read_bytes(path) == b"old"
    with pytest.raises(RuntimeError, match="mid-write"):
        fail_writing(store.path("assets", "y.bin"), b"never")
    assert keys(s3_home, "assets/") == ["assets/x.bin"]


def test_gc_on_a_local_home_removes_dead_publishers_temp_dirs(home: Path) -> None:
    store = DatasetStore()
    store.publish("sft", _table(1), kind="sft", config_hash="c1")
    dead = home / "datasets" / "sft" / ".tmp-v2-deadbeef"
    dead.mkdir()
    (dead / "part-00000.parquet").write_bytes(b"half")
    assert collect_garbage(store, parse_grace("1h")) == []
    [found] = collect_garbage(store, 0, dry_run=True)
    assert (found.kind, found.files) == ("temp", 1)
    assert dead.exists()
    assert [f.path for f in collect_garbage(store, 0)] == [str(dead)]
    assert not dead.exists()
    assert store.versions("sft") == [1]


def _tag_worker(home: str, state: str, worker: int, count: int, barriers: str) -> None:
    os.chdir(state)  # its own local state and lock files: another machine
    from ptfactory.storage.versions import DatasetStore

    store = DatasetStore(home)
    Path(barriers, f"arrived-{worker}").touch()
    while len(list(Path(barriers).glob("arrived-*"))) < 2:  # both start tagging together
        time.sleep(0.01)
    for i in range(count):
        store.tag("tags@v1", f"w{worker}-{i}")


def test_two_machines_tagging_at_once_lose_no_alias(s3_home: str, tmp_path: Path) -> None:
    """Aliases on an object store are swapped with a conditional put on the ETag that was read, not
    under a local lock: two processes with their own lock files tag 12 aliases each at once, and
    every alias and every history entry is there."""
    DatasetStore(s3_home).publish("tags", _table(1), kind="sft", config_hash="t")
    barriers = tmp_path / "barriers"
    barriers.mkdir()
    children = []
    for worker in (0, 1):
        state = tmp_path / f"machine-{worker}"
        state.mkdir()
        children.append(
            _SPAWN.Process(target=_tag_worker, args=(s3_home, str(state), worker, 12, str(barriers)))
        )
    for child in children:
        child.start()
    for child in children:
        child.join(120)
        assert child.exitcode == 0
    store = DatasetStore(s3_home)
    expected = {f"w{w}-{i}" for w in (0, 1) for i in range(12)}
    assert set(store.aliases("tags")) == expected
    body = json.loads(fsspec.filesystem("s3").cat_file(f"{s3_home}/datasets/tags/aliases.json"))
    assert sorted(h["alias"] for h in body["history"]) == sorted(expected)
    assert store.resolve("tags@w1-11").version == 1


def test_two_imports_racing_for_one_name_get_a_version_each(s3_home: str, tmp_path: Path) -> None:
    """`ptf datasets import` from two machines at once (both staged, then a barrier): two whole
    versions, each holding its own file's rows."""
    procs, files = [], {}
    for worker in (0, 1):
        state = tmp_path / f"machine-{worker}"
        state.mkdir()
        rows = [
            {
                "messages": [
                    {"role": "user", "content": f"q{worker}-{i}"},
                    {"role": "assistant", "content": f"a{i}"},
                ]
            }
            for i in range(5)
        ]
        files[worker] = state / "rows.jsonl"
        files[worker].write_text("".join(json.dumps(r) + "\n" for r in rows))
        env = {
            **os.environ,
            "PTF_HOME": s3_home,
            SEAM_ENV: _seam("staged", tmp_path / "barrier", parties=2),
            "COLUMNS": "200",
            "NO_COLOR": "1",
        }
        procs.append(
            subprocess.Popen(
                [*PTF, "datasets", "import", str(files[worker]), "--name", "imported", "--json"],
                cwd=state,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    committed = _assert_committed_versions_whole(s3_home, "imported")
    assert sorted(committed) == [1, 2]
    contents = set()
    for _, ids in committed.values():
        assert len(ids) == 5
        contents.add(frozenset(ids))
    assert len(contents) == 2  # not one file twice
    assert not keys(s3_home, "datasets/imported/.staging")
