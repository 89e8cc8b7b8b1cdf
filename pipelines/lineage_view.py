"""Rendering of ``ptf lineage`` for people (``--json`` gives the same story as data)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["render_lineage"]


def _clip(text: object, width: int = 100) -> str:
    value = "" if text is None else str(text).replace("\n", " ")
    return value if len(value) <= width else value[: width - 1] + "…"


def render_lineage(story: dict[str, Any], console: Console) -> None:
    record = story.get("record") or {}
    console.print(
        f"[bold]sample[/] {story['sample_id']} ({record.get('kind', '?')}, batch {record.get('batch', '?')})"
    )
    messages = record.get("messages") or []
    for turn in messages:
        console.print(f"  [dim]{turn['role']}:[/] {_clip(turn['content'])}")
    provenance = record.get("provenance") or {}
    shown = {k: v for k, v in provenance.items() if v not in (None, "")}
    if shown:
        console.print("[bold]provenance[/] " + json.dumps(shown, ensure_ascii=False))
    scores = record.get("scores") or {}
    for key, value in scores.items():
        if key == "judges" and value:
            for vote in value:
                score = "unparsed" if vote.get("score") is None else f"{vote['score']:g}/10"
                why = _clip(vote.get("rationale") or vote.get("raw"), 80)
                console.print(f"[bold]judge {vote['judge']}[/] ({vote.get('model')}): {score} {why}")
        elif value not in (None, [], {}):
            console.print(f"[bold]score {key}[/] " + _clip(json.dumps(value, ensure_ascii=False), 200))
    if record.get("annotation"):
        console.print("[bold]human label[/] " + json.dumps(record["annotation"], ensure_ascii=False))

    trail = Table("stage", "verdict", "reason", "detail", title="decisions")
    for decision in record.get("decisions") or []:
        trail.add_row(
            decision["stage"],
            decision["verdict"],
            decision["reason"],
            _clip(decision.get("detail"), 60),
        )
    console.print(trail)

    if story["versions"]:
        where = Table("dataset", "version", "split", "shard", "row", title="published in")
        for place in story["versions"]:
            where.add_row(
                place["dataset"],
                f"v{place['version']}",
                place.get("split", ""),
                place["shard"],
                str(place["row"]),
            )
        console.print(where)
    else:
        console.print("[yellow]in no published version[/] (see the last decision above for why)")
    if story.get("evaluations"):
        evaluated = Table(
            "version", "evaluation", "checkpoint", "tasks", "success", title="models trained on it, evaluated"
        )
        for e in story["evaluations"]:
            evaluated.add_row(
                f"{e['dataset']}@v{e['version']}",
                e["run_id"][:12],
                str(e["checkpoint"]),
                ", ".join(e["tasks"]),
                f"{e['success_rate']:.3f}" if e["success_rate"] is not None else "n/a",
            )
        console.print(evaluated)
    for item in story.get("retractions") or []:
        what = (
            f"dropped from {item['dataset']}@v{item['version']} (v{item['from']} minus the retracted rows)"
            if item["effect"] == "dropped"
            else f"kept out of {item['dataset']} from v{item['version']} on"
        )
        console.print(
            f"[bold red]retracted[/] {what}, by its {item['matched']}: {item.get('by')} at {item.get('at')}, "
            f"reason: {item.get('reason')}",
            highlight=False,
        )
    if story["stages"]:
        stages = Table("asset", "partition", "last decision", title="stage outputs")
        for stage in story["stages"]:
            decisions = stage["row"].get("decisions") or []
            last = decisions[-1] if decisions else None
            text = f"{last['stage']}: {last['verdict']} ({last['reason']})" if last else ""
            stages.add_row(stage["asset"], stage["partition"], text)
        console.print(stages)
