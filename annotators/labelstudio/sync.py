"""The one way rows reach Label Studio, and the way labels come back: idempotent, without loss.

Push (:func:`push_queue`, the only pusher: the ``review_queue`` asset, the label sensor and
``ptf annotate push`` all call it): every row of the review queue that holds a review slot
(:mod:`~ptfactory.annotators.review_queue`) and is not in its project yet becomes a task in its
queue's project (audit rows in the kind's blind audit queue), where its batch's config says
(:class:`Destination`). Rows still waiting for a slot are not pushed: a later batch's routing gives
them one. The ledger knows what each project holds; when its count disagrees with the project's (a
push that died between import and record) it is reconciled from the server first. Only the queue's
index of pending rows is read, and the records of rows that go out: nothing of the routed history.

Pull: per project, tasks touched since the ledger's watermark, oldest first, page by page; each
page's annotation events and the new watermark are committed together, so a server that goes away
mid-pull loses nothing and the next pull re-reads from where the last commit ended.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ptfactory.annotators.labelstudio.client import LabelStudioClient, ls_time
from ptfactory.annotators.labelstudio.configs import QUEUES, project_title
from ptfactory.annotators.labelstudio.ledger import Event, Ledger
from ptfactory.annotators.labelstudio.settings import AnnotationConfig
from ptfactory.annotators.labelstudio.tasks import to_task
from ptfactory.annotators.review_queue import Pending, ReviewQueue

__all__ = ["Destination", "PullResult", "PushResult", "pull", "push_queue"]


@dataclass(frozen=True)
class Destination:
    """Where a batch's review tasks go: a client for its Label Studio, its ``annotation`` settings,
    and its ``routing.accept_at`` (the task's judges' line says where the panel's bar is)."""

    client: LabelStudioClient
    settings: AnnotationConfig
    accept_at: float


@dataclass
class PushResult:
    created: Counter[str] = field(default_factory=Counter)  # queue -> tasks created
    existing: Counter[str] = field(default_factory=Counter)  # queue -> already there
    projects: dict[str, str] = field(default_factory=dict)  # project title -> its URL
    promoted: int = 0  # tasks created for rows a later batch's budget gave a slot

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


def _chunks(items: list[Any], size: int) -> Iterable[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def push_queue(
    queue: ReviewQueue,
    ledger: Ledger,
    destination: Callable[[str], Destination],
    *,
    slots: Iterable[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> PushResult:
    """Deliver every row of ``queue`` that holds a review slot (given by the budgets of ``slots``,
    default every batch) and is not in its project yet; ``destination(batch)`` says where a batch's
    rows go. Returns what was created and what was there already."""
    result = PushResult()
    groups: dict[tuple[int, str, float, int, str], tuple[Destination, list[Pending]]] = {}
    for item in queue.pending(slots):
        to = destination(item.batch)
        key = (id(to.client), to.settings.project_prefix, to.accept_at, to.settings.push_batch, item.queue)
        groups.setdefault(key, (to, []))[1].append(item)
    for (_, prefix, _, _, name), (to, items) in groups.items():
        project_id = to.client.project(prefix, name)
        result.projects[project_title(prefix, name)] = f"{to.client.url}/projects/{project_id}"
        if ledger.pushed_count(project_id) != to.client.task_count(project_id):
            remote = to.client.sample_ids(project_id)
            ledger.record_push(project_id, name, [(sid, task, None) for sid, task in remote.items()])
        known = ledger.pushed_ids(project_id)
        fresh = [item for item in items if item.sample_id not in known]
        result.existing[name] += len(items) - len(fresh)
        for chunk in _chunks(fresh, to.settings.push_batch):
            rows = {r["sample_id"]: r for r in queue.records(i.sample_id for i in chunk).to_pylist()}
            tasks = [to_task(rows[i.sample_id], to.accept_at) for i in chunk]
            task_ids = to.client.import_tasks(project_id, tasks)
            ledger.record_push(
                project_id,
                name,
                [(i.sample_id, tid, i.batch) for i, tid in zip(chunk, task_ids, strict=True)],
            )
            result.created[name] += len(chunk)
            result.promoted += sum(1 for i in chunk if i.slot != i.batch)
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
    settings: AnnotationConfig,
    *,
    progress: Callable[[int], None] | None = None,
    result: PullResult | None = None,
) -> PullResult:
    """New and changed annotations of the projects under ``settings.project_prefix``, into the
    ledger (added to ``result`` when given: one result over several prefixes)."""
    result = result or PullResult()
    prefix, page_size = settings.project_prefix, settings.pull_page
    users: dict[int, str] | None = None
    for queue in QUEUES:
        project_id = client.find_project(prefix, queue)
        if project_id is None:
            continue
        result.projects[project_title(prefix, queue)] = project_id
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
