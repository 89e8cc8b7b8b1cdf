"""`ptf run`'s progress display follows the run's event log with a cursor: every event is read
once, in order, however the log is paged, and a poll with nothing new reads nothing."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import dagster as dg

from ptfactory.pipelines.runner import follow_run


@dg.op
def first() -> int:
    return 1


@dg.op
def second(value: int) -> int:
    return value + 1


@dg.job
def two_steps() -> None:
    second(first())


def test_every_event_is_read_once_in_order_while_the_run_goes_on() -> None:
    instance = dg.DagsterInstance.ephemeral()
    run_id = str(uuid.uuid4())
    read: list[int] = []
    real = instance.get_records_for_run

    def counted(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        read.append(len(found.records))
        return found

    instance.get_records_for_run = counted  # type: ignore[method-assign]
    seen: list[Any] = []
    cursor: str | None = None
    worker = threading.Thread(target=lambda: two_steps.execute_in_process(instance=instance, run_id=run_id))
    worker.start()
    while True:  # the runner's loop: poll while the run goes on, then once more
        alive = worker.is_alive()
        records, cursor = follow_run(instance, run_id, cursor, page=3)
        seen.extend(records)
        if not alive:
            break
    worker.join()

    everything = instance.all_logs(run_id)
    assert len(everything) > 10  # the premise: a log several pages long
    assert [(e.timestamp, e.message) for e in seen] == [(e.timestamp, e.message) for e in everything]
    assert sum(read) == len(everything)  # no event read twice
    assert max(read) <= 3
    before = len(read)
    assert follow_run(instance, run_id, cursor) == ([], cursor)  # nothing new: one empty page
    assert read[before:] == [0]
