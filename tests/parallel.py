"""How `make test` shares the suite between pytest-xdist workers (``-n 2 --dist loadfile``).

Each test file is one unit of work, run by one worker, so a file's module fixtures (a Ray cluster,
a warm sandbox pool, a loaded engine) start once. The files that use one of the session services
(Label Studio, PostgreSQL, the S3 server) are one unit per service, so each service starts once.
Units are handed out longest first, so the run does not end with one worker busy on a long file
while the other waits.

xdist's own ``loadgroup`` cannot do this here: it tags test ids through an attribute pytest 9.2
no longer reads, so its groups are silently ignored.
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling

# session fixture -> the unit of the files that use it
SERVICES = {"label_studio": "labelstudio", "postgres_server": "postgres", "s3_endpoint": "s3"}

# The files that use a session service. The scheduler runs in the controller, which sees test ids
# only; the workers check this table against the fixtures each file really uses (check_services).
SERVICE_FILES = {
    "tests/integration/test_labelstudio.py": "labelstudio",
    "tests/integration/test_labelstudio_browser.py": "labelstudio",
    "tests/integration/test_labelstudio_batch_config.py": "labelstudio",
    "tests/integration/test_labelstudio_prefill_audit.py": "labelstudio",
    "tests/scaling/test_postgres_instance.py": "postgres",
    "tests/storage/test_delta.py": "s3",
    "tests/storage/test_incremental.py": "s3",
    "tests/storage/test_publish_race.py": "s3",
    "tests/storage/test_s3_publish.py": "s3",
}

# Units measured at over 40 s in one serial `make test` (2-core box, 2026-12-03: 1,473 s of tests
# in all; set-up, call and tear-down), longest first. The units not named run after these, in
# collection order: a new long file only lengthens the run's tail until it is added here.
LONG_FIRST: tuple[str, ...] = (
    "labelstudio",  # 209 s
    "tests/scaling/test_ray_cluster.py",  # 140
    "tests/pipelines/test_cli.py",  # 92
    "tests/reliability/test_kill_and_rerun.py",  # 90
    "tests/pipelines/test_budget_run.py",  # 65
    "tests/annotators/test_llm_votes.py",  # 63
    "tests/engines/test_openai_engine.py",  # 55
    "tests/pipelines/test_cli_judge.py",  # 55
    "s3",  # 51
    "tests/pipelines/test_clean_data.py",  # ~50 loaded (issue 38; 25 on a quiet box)
    "postgres",  # 43
    "tests/agent/test_rollouts_model.py",  # 42
    "tests/training/test_train.py",  # 42
    "tests/engines/test_vllm_engine.py",  # 41
)


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def unit_of(nodeid: str) -> str:
    path = file_of(nodeid)
    return SERVICE_FILES.get(path, path)


class UnitScheduling(LoadScopeScheduling):
    """xdist's file scheduling, with the files of one session service as one unit."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)


UNLISTED = pytest.StashKey[str]()


def check_services(items: list[pytest.Item]) -> None:
    """Mark the tests of a file that uses a session service SERVICE_FILES does not give it (that
    file would start a second copy of the service on the other worker): they fail at set-up, saying
    so (fail_unlisted)."""
    for item in items:
        path = file_of(item.nodeid)
        for fixture, unit in SERVICES.items():
            if fixture in getattr(item, "fixturenames", ()) and SERVICE_FILES.get(path) != unit:
                item.stash[UNLISTED] = (
                    f'tests/parallel.py: add "{path}": "{unit}" to SERVICE_FILES (the file uses the '
                    f"{fixture} session service; parallel runs keep a service's files on one worker)"
                )


def fail_unlisted(item: pytest.Item) -> None:
    if UNLISTED in item.stash:
        pytest.fail(item.stash[UNLISTED], pytrace=False)


def order_longest_first(items: list[pytest.Item]) -> None:
    """The long units first (the controller hands units out in collection order); a stable sort,
    so the rest keep their order."""
    rank = {unit: i for i, unit in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(unit_of(item.nodeid), len(rank)))
