"""Publishers racing over one dataset, interleaved deterministically (issue 39 item 2): a curation run
(the ``sft_dataset`` asset, through Dagster) is held between what it read — the latest version, the
retractions, its change — and the publish lock while ``ptf datasets retract`` or another batch's run
publishes, and the other way round. Whatever the order, no retracted row comes back and every batch
stays. On the local store (a file lock) and on a real S3 API server (conditional commits).

The hold is ``storage.seams.hold(BEFORE_PUBLISH)``: the first publisher to reach the point stops on a
``threading.Event`` until the test releases it.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from ptfactory.assets.datasets import sft_dataset
from ptfactory.assets.resources import factory_resources
from ptfactory.storage.assetstore import AssetStore
from ptfactory.storage.retract import retract
from ptfactory.storage.seams import BEFORE_PUBLISH, SEAM_ENV, hold
from ptfactory.storage.versions import DatasetStore
from tests.filters.test_leaks import QUESTIONS, _table

pytestmark = pytest.mark.integration
_SPAWN = multiprocessing.get_context("spawn")

_Q = list(QUESTIONS.values())
X, Y, Z = _table(_Q[0:3], "x"), _table(_Q[3:6], "y"), _table(_Q[6:8], "z")
# a row of batch x that a later label made (x's retraction covers it too), and two one-row batches
X_NEW = _table([f"{_Q[0]}| Also, rocks."], "x")
A, B = _table(_Q[8:9], "a"), _table(_Q[9:10], "b")


@pytest.fixture(autouse=True)
def _collect_here() -> Iterator[None]:
    """Run the finalizers of what the racing runs left (Dagster instances, threads' objects) now.
    Collected later, inside another module's import, one that imports lazily nests an ``ast.parse``
    in pytest's assertion rewriting, and CPython 3.11.7 then reports an AST recursion depth
    mismatch (gh-106905)."""
    yield
    gc.collect()


@pytest.fixture(params=["local", "s3"])
def race_home(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """PTF_HOME on the local disk, or on the moto S3 server (``s3_home``)."""
    if request.param == "local":
        return str(tmp_path / "home")
    return str(request.getfixturevalue("s3_home"))


def _config(tmp_path: Path, model: Path, extra: str = "") -> Path:
    config = tmp_path / ("factory-v1.yaml" if extra else "factory.yaml")
    # no held-out split: the change over the latest version is published as a delta
    config.write_text(
        f"engines:\n  generator: {{model: {model}}}\ndatasets: {{validation_fraction: 0}}\n{extra}"
    )
    return config


def _curate(home: str, config: Path, curated: pa.Table) -> dg.ExecuteInProcessResult:
    """A curation run's publish: curated_samples as curation wrote it, then the sft_dataset asset."""
    AssetStore(home).write("curated_samples", curated)
    # disposed in the thread that made it: its SQLite connections belong to that thread
    with dg.DagsterInstance.ephemeral() as instance:
        return dg.materialize(
            [dg.SourceAsset("curated_samples", io_manager_key="samples_io"), sft_dataset],
            instance=instance,
            resources=factory_resources(str(config), home),
            raise_on_error=False,
        )


def _in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = work()
        except BaseException as exc:  # reported by the test, not lost in the thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def _held_while(first: Callable[[], Any], second: Callable[[], Any]) -> tuple[Any, Any]:
    """Run ``first`` until it reaches the publish with what it read, run ``second`` to the end, then
    let ``first`` go on. Returns both results."""
    with hold(BEFORE_PUBLISH) as held:
        thread, box = _in_thread(first)
        held.wait_arrived()
        other = second()
        held.release()
        thread.join(300)
    assert not thread.is_alive(), "the held publisher did not finish"
    if "error" in box:
        raise box["error"]
    return box["result"], other


def _ok(result: dg.ExecuteInProcessResult) -> dg.ExecuteInProcessResult:
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    return result


def _latest(home: str) -> tuple[int, set[str], list[str]]:
    store = DatasetStore(home)
    manifest = store.resolve("sft@latest")
    ids = set(store.read("sft@latest").column("sample_id").to_pylist())
    return manifest.version, ids, manifest.batches


def _ids(*tables: pa.Table) -> set[str]:
    return {i for t in tables for i in t.column("sample_id").to_pylist()}


def test_a_retraction_during_a_curation_publish_stays(
    race_home: str, tmp_path: Path, tiny_model: Path
) -> None:
    home = race_home
    config = _config(tmp_path, tiny_model)
    _ok(_curate(home, config, pa.concat_tables([X, Y])))
    store = DatasetStore(home)

    # the curation read v1 (no retraction) and planned [x + a new x row, y, z]; x is retracted meanwhile
    curated = pa.concat_tables([X, X_NEW, Y, Z])
    curation, _ = _held_while(
        lambda: _curate(home, config, curated),
        lambda: retract(store, "sft@latest", ["x"], [], reason="bad batch", by="carol"),
    )
    _ok(curation)
    version, ids, batches = _latest(home)
    assert version == 3 and store.manifest("sft", 2).retraction is not None
    assert ids == _ids(Y, Z) and batches == ["y", "z"]  # no x row, old or new; z kept


def test_a_curation_publish_during_a_retraction_stays(
    race_home: str, tmp_path: Path, tiny_model: Path
) -> None:
    home = race_home
    config = _config(tmp_path, tiny_model)
    _ok(_curate(home, config, pa.concat_tables([X, Y])))
    store = DatasetStore(home)

    # the retraction read v1 and made v1 - x; a curation publishes batch z meanwhile
    retraction, curation = _held_while(
        lambda: retract(store, "sft@latest", ["x"], [], reason="bad batch", by="carol"),
        lambda: _curate(home, config, pa.concat_tables([X, Y, Z])),
    )
    _ok(curation)
    assert retraction.manifest.version == 3 and retraction.manifest.parent == 2
    version, ids, batches = _latest(home)
    assert version == 3 and ids == _ids(Y, Z) and batches == ["y", "z"]  # z kept, x out


@pytest.mark.parametrize("held", ["a", "b"])
def test_two_batches_publishing_at_once_both_stay(
    race_home: str, tmp_path: Path, tiny_model: Path, held: str
) -> None:
    home = race_home
    # v1 under another config: the racing runs cannot plan a delta over it, so they publish whole
    # tables through publish(), whose base check is the one under test here
    _ok(_curate(home, _config(tmp_path, tiny_model, "storage: {shard_rows: 999}\n"), X))
    config = _config(tmp_path, tiny_model)
    runs = {"a": pa.concat_tables([X, A]), "b": pa.concat_tables([X, B])}
    first, second = runs[held], runs["b" if held == "a" else "a"]
    results = _held_while(lambda: _curate(home, config, first), lambda: _curate(home, config, second))
    for result in results:
        _ok(result)
    version, ids, batches = _latest(home)
    assert version == 3 and ids == _ids(X, A, B) and batches == ["a", "b", "x"]


def _machine(home: str, state: str, tag: str, barrier: str) -> None:
    """A publisher on another machine: reads v1, stages its whole table, meets the other at the
    barrier after staging (both then claim), and on BaseMoved moves its change onto the latest."""
    os.chdir(state)  # its own local state (catalog), as on another machine
    os.environ[SEAM_ENV] = json.dumps({"point": "staged", "dir": barrier, "parties": 2})
    from ptfactory.storage.rebase import rebase
    from ptfactory.storage.versions import BaseMoved

    store = DatasetStore(home)
    base = store.latest("sft")
    table = pa.concat_tables([store.read("sft@latest"), _table([f"{tag} is a batch of its own."], tag)])
    outcome: dict[str, int] = {}

    def publish(rows: pa.Table, over: int) -> int:
        batches = sorted(set(rows.column("batch").to_pylist()))
        made = store.publish("sft", rows, kind="sft", config_hash="c", batches=batches, base=over)
        return made.manifest.version

    try:
        outcome["version"] = publish(table, base)
    except BaseMoved:
        os.environ.pop(SEAM_ENV)
        onto = store.latest("sft")
        outcome = {"moved": onto, "version": publish(rebase(store, "sft", table, base=base, onto=onto), onto)}
    Path(state, "outcome.json").write_text(json.dumps(outcome))


def test_whole_tables_racing_on_s3_claims_never_land_over_a_newer_version(
    s3_home: str, tmp_path: Path
) -> None:
    """Two machines publish whole tables read from v1 and claim at once (a barrier after staging):
    the one whose claim is above the other's finds v2 committed below it, is refused (BaseMoved),
    and lands its change over v2 instead: v3 holds both batches."""
    DatasetStore(s3_home).publish("sft", X, kind="sft", config_hash="c", batches=["x"])
    children = []
    for tag in ("a", "b"):
        state = tmp_path / f"machine-{tag}"
        state.mkdir()
        args = (s3_home, str(state), tag, str(tmp_path / "barrier"))
        children.append(_SPAWN.Process(target=_machine, args=args))
    for child in children:
        child.start()
    for child in children:
        child.join(150)
        assert child.exitcode == 0
    outcomes = [json.loads((tmp_path / f"machine-{t}" / "outcome.json").read_text()) for t in ("a", "b")]
    assert sorted(o["version"] for o in outcomes) == [2, 3]
    assert [o.get("moved") for o in sorted(outcomes, key=lambda o: o["version"])] == [None, 2]
    store = DatasetStore(s3_home)
    assert store.resolve("sft@latest").batches == ["a", "b", "x"]
    assert len(store.read("sft@latest")) == X.num_rows + 2
