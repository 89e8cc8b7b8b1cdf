"""How make test's workers share the suite (tests/parallel.py): units, the service table's check, order."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests import parallel
from tests.conftest import REPO


@dataclass
class Item:  # the parts of a pytest.Item the functions read
    nodeid: str
    fixturenames: tuple[str, ...] = ()
    stash: pytest.Stash = field(default_factory=pytest.Stash)


def test_a_file_is_a_unit_and_a_service_joins_its_files() -> None:
    assert parallel.unit_of("tests/filters/test_dedup.py::test_a[x::y]") == "tests/filters/test_dedup.py"
    assert parallel.unit_of("tests/storage/test_delta.py::test_a") == "s3"
    assert parallel.unit_of("tests/storage/test_s3_publish.py::test_b") == "s3"
    assert parallel.unit_of("tests/integration/test_labelstudio.py::T::test_c") == "labelstudio"


def test_a_file_using_an_unlisted_service_fails_at_set_up_and_says_the_fix() -> None:
    listed = Item("tests/storage/test_delta.py::test_a", ("s3_endpoint", "tmp_path"))
    unlisted = Item("tests/storage/test_new.py::test_b", ("tmp_path", "s3_home", "s3_endpoint"))
    wrong = Item("tests/storage/test_s3_publish.py::test_c", ("label_studio",))
    plain = Item("tests/storage/test_new.py::test_d", ("tmp_path",))
    items: list[Any] = [listed, unlisted, wrong, plain]
    parallel.check_services(items)
    parallel.fail_unlisted(listed)  # type: ignore[arg-type]
    parallel.fail_unlisted(plain)  # type: ignore[arg-type]
    with pytest.raises(pytest.fail.Exception, match=re.escape('add "tests/storage/test_new.py": "s3"')):
        parallel.fail_unlisted(unlisted)  # type: ignore[arg-type]
    with pytest.raises(
        pytest.fail.Exception, match=re.escape('"tests/storage/test_s3_publish.py": "labelstudio"')
    ):
        parallel.fail_unlisted(wrong)  # type: ignore[arg-type]


def test_long_units_go_first_and_the_rest_keep_their_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "LONG_FIRST", ("labelstudio", "tests/b.py"))
    ids = [
        "tests/a.py::t1",
        "tests/b.py::t1",
        "tests/integration/test_labelstudio.py::t1",
        "tests/c.py::t1",
        "tests/b.py::t2",
        "tests/integration/test_labelstudio_browser.py::t1",
    ]
    items: list[Any] = [Item(i) for i in ids]
    parallel.order_longest_first(items)
    assert [i.nodeid for i in items] == [
        "tests/integration/test_labelstudio.py::t1",
        "tests/integration/test_labelstudio_browser.py::t1",
        "tests/b.py::t1",
        "tests/b.py::t2",
        "tests/a.py::t1",
        "tests/c.py::t1",
    ]


def test_every_long_unit_named_is_a_service_or_a_file() -> None:
    for unit in parallel.LONG_FIRST:
        assert unit in parallel.SERVICES.values() or (REPO / unit).is_file(), unit
    for path in parallel.SERVICE_FILES:
        assert (REPO / path).is_file(), path
