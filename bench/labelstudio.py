"""Push and pull throughput against a real Label Studio, in tasks/s, with a named baseline.

- push: ``annotators.labelstudio.sync.push_queue`` (the review queue's rows, batched imports +
  ledger) vs one SDK
  ``tasks.create`` call per task (what a naive client does);
- pull: the incremental pull (tasks touched since the watermark) after labeling ``--labeled`` of
  the tasks vs the SDK's full listing of every task with its annotations (``tasks.list``).

Starts its own server under a temporary state dir (PTF_LS_VENV points at the venv `make labelstudio`
made). Median of ``--repeat`` runs. Usage: python bench/labelstudio.py [--tasks 500] [--labeled 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ptfactory.annotators.labelstudio.client import LabelStudioClient
from ptfactory.annotators.labelstudio.ledger import Ledger
from ptfactory.annotators.labelstudio.server import LabelStudioServer
from ptfactory.annotators.labelstudio.settings import AnnotationConfig
from ptfactory.annotators.labelstudio.sync import Destination, pull, push_queue
from ptfactory.annotators.review_queue import ReviewQueue
from ptfactory.annotators.routing import RoutingConfig
from ptfactory.storage.schema import from_records, sample_id


def _rows(count: int, tag: str) -> list[dict[str, Any]]:
    rows = []
    for i in range(count):
        messages = [
            {"role": "user", "content": f"{tag} question {i}: explain it."},
            {"role": "assistant", "content": f"Answer {i}."},
        ]
        rows.append(
            {
                "sample_id": sample_id("sft", messages),
                "batch": tag,
                "kind": "sft",
                "messages": messages,
                "scores": {
                    "judges": [{"judge": "llm", "model": "m", "score": 6.0, "rationale": "ok"}],
                    "judge_mean": 6.0,
                },
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--labeled", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--port", type=int, default=8181)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ptf-bench-ls-") as tmp:
        server = LabelStudioServer(Path(tmp), port=args.port)
        server.up(say=lambda line: print(line, file=sys.stderr))
        try:
            token = server.credentials().token
            client = LabelStudioClient(server.url, token)
            http = httpx.Client(base_url=server.url, headers={"Authorization": f"Token {token}"}, timeout=120)
            ours_push, naive_push, ours_pull, full_list = [], [], [], []
            for round_ in range(args.repeat):
                ledger = Ledger(Path(tmp) / f"ledger-{round_}.sqlite")
                rows = _rows(args.tasks, f"r{round_}")
                settings = AnnotationConfig(project_prefix=f"bench{round_}")
                queue = ReviewQueue(Path(tmp) / f"queue-{round_}.sqlite")
                routing = RoutingConfig(review_budget=args.tasks, audit_rate=0)
                queue.admit(f"r{round_}", from_records(rows), routing)  # every row holds a review slot
                where = Destination(client, settings, 7.0)
                started = time.perf_counter()
                push_queue(queue, ledger, lambda _, to=where: to)
                ours_push.append(args.tasks / (time.perf_counter() - started))
                project = client.project(settings.project_prefix, "sft")

                naive = client.project(f"naive{round_}", "sft")
                started = time.perf_counter()
                for row in rows[: max(50, args.tasks // 5)]:
                    client.sdk.tasks.create(
                        project=naive,
                        data={
                            "sample_id": row["sample_id"],
                            "instruction": "x",
                            "response": "y",
                            "judges": "",
                        },
                    )
                naive_push.append(max(50, args.tasks // 5) / (time.perf_counter() - started))

                pull(client, ledger, settings)  # sets the watermark
                tasks = [tid for _, tid in sorted(client.sample_ids(project).items())][: args.labeled]
                for task in tasks:
                    http.post(
                        f"/api/tasks/{task}/annotations/",
                        json={
                            "result": [
                                {
                                    "from_name": "verdict",
                                    "to_name": "response",
                                    "type": "choices",
                                    "value": {"choices": ["accept"]},
                                }
                            ]
                        },
                    )
                started = time.perf_counter()
                pulled = pull(client, ledger, settings)
                elapsed = time.perf_counter() - started
                assert pulled.added["created"] == args.labeled, pulled
                ours_pull.append(args.labeled / elapsed)

                started = time.perf_counter()
                listed = sum(1 for _ in client.sdk.tasks.list(project=project, fields="all", page_size=100))
                full_list.append(args.labeled / (time.perf_counter() - started))
                assert listed == args.tasks
        finally:
            server.down()
    med = statistics.median
    print(
        f"push: ptfactory {med(ours_push):.0f} tasks/s vs one tasks.create per task {med(naive_push):.0f} tasks/s "
        f"({med(ours_push) / med(naive_push):.1f}x)"
    )
    print(
        f"pull {args.labeled} new labels among {args.tasks} tasks: incremental {med(ours_pull):.0f} labels/s vs full "
        f"tasks.list {med(full_list):.1f} labels/s ({med(ours_pull) / med(full_list):.1f}x)"
    )


if __name__ == "__main__":
    main()
