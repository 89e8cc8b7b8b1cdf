"""Push routed samples to Label Studio and pull annotations back, idempotently and without loss.

Push: rows awaiting review (:func:`~ptfactory.storage.schema.awaiting_review`: routing verdict
``route`` — a review slot, an audit, or a waiting row a later batch's budget promoted — and no
review yet) become tasks in their queue's project (audit rows in the kind's blind audit queue);
rows still ``wait``-ing are not pushed: a later batch's routing gives them a slot, and its push
(``review_queue``, ``ptf annotate push``) delivers them. The ledger knows what was pushed, and when
its count disagrees with the project's (a push that died between import and record) it is
reconciled from the server first.

Pull: per project, tasks touched since the ledger's watermark, oldest first, page by page; each
page's annotation events and the new watermark are committed together, so a server that goes away
mid-pull loses nothing and the next pull re-reads from where the last commit ended.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ptfactory.annotators.labelstudio.client import LabelStudioClient, ls_time
from ptfactory.annotators.labelstudio.configs import QUEUES
from ptfactory.annotators.labelstudio.ledger import Event, Ledger
from ptfactory.annotators.labelstudio.tasks import queue_of, to_task
from ptfactory.storage.schema import awaiting_review, dropped_mask, latest_copies

__all__ = ["PullResult", "PushResult", "pull", "push", "review_rows"]


@dataclass
class PushResult:
    created: Counter[str] = field(default_factory=Counter)  # queue -> tasks created
    existing: Counter[str] = field(default_factory=Counter)  # queue -> already there
    projects: dict[str, int] = field(default_factory=dict)

    @property
    def total_created(self) -> int:
        return sum(self.created.values())


@dataclass
class PullResult:
    added: Counter[str] = field(default_factory=Counter)  # event kind -> events added
    tasks_read: int = 0
    projects: dict[str, int] = field(default_factory=dict)

    @property
    def total_added(self) -> int:
        return sum(self.added.values())


def review_rows(table: pa.Table) -> list[dict[str, Any]]:
    """Rows awaiting an expert, each sample once (its newest copy; of several batches, the first)."""
    table = latest_copies(table)
    dropped = dropped_mask(table).to_pylist()
    seen: set[str] = set()
    out = []
    for row, gone in zip(table.to_pylist(), dropped, strict=True):
        if gone or not awaiting_review(row["decisions"]) or row["sample_id"] in seen:
            continue
        seen.add(row["sample_id"])
        out.append(row)
    return out


def _chunks(items: list[Any], size: int) -> Iterable[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def push(
    client: LabelStudioClient,
    ledger: Ledger,
    rows: list[dict[str, Any]],
    *,
    prefix: str,
    accept_at: float,
    batch_size: int = 200,
    progress: Callable[[int], None] | None = None,
) -> PushResult:
    result = PushResult()
    by_queue: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_queue.setdefault(queue_of(row), []).append(row)
    for queue, queued in by_queue.items():
        project_id = client.project(prefix, queue)
        result.projects[queue] = project_id
        if ledger.pushed_count(project_id) != client.task_count(project_id):
            remote = client.sample_ids(project_id)
            ledger.record_push(project_id, queue, [(sid, task, None) for sid, task in remote.items()])
        known = ledger.pushed_ids(project_id)
        fresh = []
        for row in queued:  # a sample given twice (two batches' files) is still one task
            if row["sample_id"] not in known:
                known.add(row["sample_id"])
                fresh.append(row)
        result.existing[queue] += len(queued) - len(fresh)
        for chunk in _chunks(fresh, batch_size):
            task_ids = client.import_tasks(project_id, [to_task(row, accept_at) for row in chunk])
            ledger.record_push(
                project_id,
                queue,
                [(row["sample_id"], tid, row["batch"]) for row, tid in zip(chunk, task_ids, strict=True)],
            )
            result.created[queue] += len(chunk)
            if progress:
                progress(len(chunk))
    return result


def _diff(
    task: dict[str, Any], known: dict[int, str | None], project_id: int, queue: str, users: dict[int, str]
) -> list[Event]:
    sample_id = (task.get("data") or {}).get("sample_id")
    events = []
    present: set[int] = set()
    for annotation in task.get("annotations") or []:
        aid = int(annotation["id"])
        present.add(aid)
        updated = ls_time(annotation["updated_at"]) if annotation.get("updated_at") else None
        if aid in known and known[aid] == updated:
            continue
        who = annotation.get("completed_by")
        if isinstance(who, dict):
            annotator = who.get("email") or str(who.get("id"))
        else:
            annotator = users.get(int(who), str(who)) if who is not None else None
        events.append(
            Event(
                event="updated" if aid in known else "created",
                annotation_id=aid,
                task_id=int(task["id"]),
                project_id=project_id,
                queue=queue,
                sample_id=str(sample_id) if sample_id else None,
                annotator=annotator,
                result=annotation.get("result"),
                was_cancelled=bool(annotation.get("was_cancelled")),
                created_at=ls_time(annotation["created_at"]) if annotation.get("created_at") else None,
                updated_at=updated,
                lead_time_s=float(annotation["lead_time"])
                if annotation.get("lead_time") is not None
                else None,
            )
        )
    touched = ls_time(task["updated_at"]) if task.get("updated_at") else None
    for aid in sorted(set(known) - present):
        events.append(
            Event(
                "deleted",
                aid,
                int(task["id"]),
                project_id,
                queue,
                str(sample_id) if sample_id else None,
                None,
                None,
                False,
                None,
                touched,
                None,
            )
        )
    return events


def pull(
    client: LabelStudioClient,
    ledger: Ledger,
    *,
    prefix: str,
    page_size: int = 100,
    progress: Callable[[int], None] | None = None,
) -> PullResult:
    result = PullResult()
    users: dict[int, str] | None = None
    for queue in QUEUES:
        project_id = client.find_project(prefix, queue)
        if project_id is None:
            continue
        result.projects[queue] = project_id
        for tasks in client.tasks_updated_since(project_id, ledger.watermark(project_id), page_size):
            if users is None:
                users = client.users()
            known = ledger.live_annotations(int(t["id"]) for t in tasks)
            events = [e for t in tasks for e in _diff(t, known[int(t["id"])], project_id, queue, users)]
            marks = [ls_time(t["updated_at"]) for t in tasks if t.get("updated_at")]
            result.added.update(ledger.commit_page(project_id, events, max(marks) if marks else None))
            result.tasks_read += len(tasks)
            if progress:
                progress(len(tasks))
    return result
