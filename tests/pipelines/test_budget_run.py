"""`ptf run` under a budget, through the real Dagster run and engine (tiny model): it stops at the
budget with `budget_exhausted` rows, publishes nothing, and a rerun with a larger budget finishes
with no finished request sent again. `--dry-run` prints the estimate and runs nothing."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pyarrow.parquet as pq
import pytest

from ptfactory.annotators.judges.llm import TEMPLATES as JUDGE_TEMPLATES
from ptfactory.generators.prompts import template
from ptfactory.storage.assetstore import AssetStore
from tests.conftest import fast_factory_yaml

pytestmark = pytest.mark.integration

Ptf = Callable[..., CompletedProcess[str]]


def _tokens(text: str) -> int:
    return -(-len(text) // 4)


def _render(name: str, folder: Path | None = None, **values: object) -> str:
    return (template(name, folder) if folder else template(name)).render(**values)


def _events(log: Path) -> list[tuple[str, str]]:
    return [(e, k) for e, k in (line.split() for line in log.read_text().splitlines() if line.strip())]


def _budgeted_yaml(model: Path) -> str:
    """The fast test config with one request per chunk (the budget is asked before each) and only
    the judge priced: a dollar budget then lets generation and difficulty through and stops judging
    after its first chunk. The judge sees only the rows difficulty kept (the seeds' two reference
    answers; the tiny model's truncated samples cost no judge call), so its chunk is one row: the
    first finishes, and the one after it does not."""
    config = fast_factory_yaml(model).replace("price_per_mtok: 0.5}", "price_per_mtok: 0, chunk_size: 1}")
    judge = f"engine: {{model: {model}}}"
    assert judge in config
    return config.replace(judge, f"engine: {{model: {model}, price_per_mtok: 0.5, chunk_size: 1}}")


def _budgeted_project(project: Path, model: Path, tmp_path: Path) -> tuple[Path, dict[str, str], AssetStore]:
    """The project on the budgeted config: the engine call log, the env that turns it on, the store."""
    (project / "factory.yaml").write_text(_budgeted_yaml(model))
    log = tmp_path / "calls.log"
    return log, {"PTF_ENGINE_CALL_LOG": str(log)}, AssetStore(str(project / ".ptf"))


def _run(ptf: Ptf, seeds: Path, budget: str, env: dict[str, str]) -> CompletedProcess[str]:
    return ptf("run", "--seeds", str(seeds), "--batch", "b1", "--budget", budget, "--json", env=env)


def test_a_run_stops_at_its_budget_and_a_larger_budget_finishes_it(
    ptf: Ptf, project: Path, tiny_model: Path, seeds_file: Path, tmp_path: Path
) -> None:
    log, env, store = _budgeted_project(project, tiny_model, tmp_path)

    # $0.0000001: generation and difficulty cost $0 here; the judge's first chunk passes it
    stopped = _run(ptf, seeds_file, "usd=0.0000001", env)
    assert stopped.returncode == 3, stopped.stderr[-3000:]
    assert "stopped at its budget" in stopped.stderr and "nothing of the batch published" in stopped.stderr
    outcome = json.loads(stopped.stdout)
    runs = [_events(log)]
    assert outcome["budget"] == {"usd": 1e-7} and outcome["spent_usd"] > 1e-7
    assert outcome["budget_stops"][0][0] == "judged_samples"
    with sqlite3.connect(project / ".ptf" / "budget.sqlite") as ledger:
        chunks = ledger.execute(
            "SELECT count(*) FROM spend WHERE run_id = ? AND asset = 'judged_samples'", (outcome["run_id"],)
        ).fetchone()[0]
    assert chunks == 1  # past the limit, the judge's engine sent nothing more
    meta = outcome["materializations"]
    assert meta["candidate_responses"]["budget_exhausted"] is False
    assert meta["candidate_responses"]["budget_spent_tokens"] > 0  # counted, at $0 a token
    assert meta["candidate_responses"]["budget_spent_usd"] == 0
    assert meta["judged_samples"]["budget_usd"] == 1e-7 and meta["judged_samples"]["budget_spent_usd"] > 0
    judged = store.read("judged_samples", "b1").to_pylist()
    stopped_rows = [r for r in judged if r["decisions"][-1]["reason"] == "budget_exhausted"]
    voted = [r for r in judged if (r["scores"] or {}).get("judges")]
    assert stopped_rows and voted  # finished rows kept their votes, the rest wait for a rerun
    assert meta["judged_samples"]["budget_exhausted_rows"] == len(stopped_rows)
    routed = store.read("routed_samples", "b1").to_pylist()
    held = [r for r in routed if r["decisions"][-1]["stage"] == "route"]
    assert held and all(r["decisions"][-1]["reason"] == "budget_exhausted" for r in held)  # held back
    assert meta["sft_dataset"]["created"] is False and not (project / ".ptf" / "datasets" / "sft").exists()

    finished = ptf("run", "--seeds", str(seeds_file), "--batch", "b1", "--budget", "usd=1", env=env)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "published sft@v1" in finished.stdout
    runs.append(_events(log)[len(runs[0]) :])
    done: set[str] = set()
    for calls in runs:
        resent = {k for e, k in calls if e == "sent"} & done
        assert resent == set(), f"{len(resent)} finished requests were sent again"
        done |= {k for e, k in calls if e == "done"}
    assert any(e == "sent" for e, _ in runs[1])  # the rest was sent


def _published(version: Path) -> list[dict[str, object]]:
    return [r for shard in sorted(version.glob("*.parquet")) for r in pq.read_table(shard).to_pylist()]


def test_publish_partial_publishes_what_finished_and_never_a_stopped_row(
    ptf: Ptf, project: Path, tiny_model: Path, seeds_file: Path, tmp_path: Path
) -> None:
    """The same stop with ``publish_partial=true``: the rows the judge finished are routed and
    published, the budget_exhausted ones are not (in no version until a rerun finishes them), and
    the rerun re-sends no finished request."""
    log, env, store = _budgeted_project(project, tiny_model, tmp_path)

    stopped = _run(ptf, seeds_file, "usd=0.0000001,publish_partial=true", env)
    assert stopped.returncode == 3, stopped.stderr[-3000:]
    assert (
        "stopped at its budget" in stopped.stderr and "nothing of the batch published" not in stopped.stderr
    )
    first = _events(log)
    meta = json.loads(stopped.stdout)["materializations"]
    judged = store.read("judged_samples", "b1").to_pylist()
    waiting = {r["sample_id"] for r in judged if r["decisions"][-1]["reason"] == "budget_exhausted"}
    voted = {r["sample_id"] for r in judged if (r["scores"] or {}).get("judges")}
    assert waiting and voted and not waiting & voted
    routed = store.read("routed_samples", "b1").to_pylist()
    assert not any(r["decisions"][-1]["stage"] == "route" for r in routed if r["sample_id"] in waiting)
    accepted = {
        r["sample_id"] for r in routed if r["kind"] == "sft" and r["decisions"][-1]["reason"] == "auto_accept"
    }
    assert accepted and accepted <= voted  # accept_at 1: every finished sft row the judge voted on
    assert meta["sft_dataset"]["created"] is True
    published = {str(r["sample_id"]) for r in _published(project / ".ptf" / "datasets" / "sft" / "v1")}
    assert published == accepted and not published & waiting

    finished = ptf("run", "--seeds", str(seeds_file), "--batch", "b1", "--budget", "usd=1", env=env)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "published sft@v2" in finished.stdout
    second = _events(log)[len(first) :]
    resent = {k for e, k in second if e == "sent"} & {k for e, k in first if e == "done"}
    assert resent == set(), f"{len(resent)} finished requests were sent again"
    republished = {str(r["sample_id"]) for r in _published(project / ".ptf" / "datasets" / "sft" / "v2")}
    assert published < republished and republished & waiting  # the rerun finished the stopped rows


DRY_YAML = """\
engines:
  generator: {backend: transformers, model: /nonexistent/model, price_per_mtok: 2.0}
  student: {backend: transformers, model: /nonexistent/model, price_per_mtok: 1.0}
generation:
  self_instruct: {count: 2, examples: 1}
  evol_instruct: {count: 1, operations: [deepen]}
  code: {count: 1}
  instructions: {max_tokens: 12}
  responses: {n: 2, max_tokens: 8}
difficulty: {methods: {sft: ifd, code: pass_rate}, k: 2, max_tokens: 16}
judges:
  - {name: execution, type: execution}
  - {name: tiny, type: llm, engine: {model: /nonexistent/model, price_per_mtok: 4.0}, scoring: likelihood}
"""


def test_dry_run_prints_requests_tokens_and_dollars_per_stage_and_runs_nothing(
    ptf: Ptf, project: Path, seeds_file: Path, tmp_path: Path
) -> None:
    """Three sft seeds (two with a reference), a model that does not exist: the numbers come from
    the config and the seeds alone."""
    (project / "factory.yaml").write_text(DRY_YAML)
    log = tmp_path / "calls.log"
    result = ptf(
        "run",
        "--seeds",
        str(seeds_file),
        "--dry-run",
        "--json",
        "--budget",
        "tokens=500",
        env={"PTF_ENGINE_CALL_LOG": str(log)},
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    got = {
        (s["stage"], s["part"]): (s["requests"], s["prompt_tokens"], s["completion_tokens"], s["usd"])
        for s in report["stages"]
    }
    # by hand: 2 + 1 new instructions at 12 tokens; the 3 seeds and the 3 new instructions answered
    # twice at 8; 6 x 2 answers and 2 references scored twice (IFD) and once by the judge
    # (likelihood); 6 instructions with two answers, compared in both orders. A text the seeds hold
    # is ~4 characters a token, a generated one its max_tokens, a chat message 4 tokens more; a
    # prompt template counts as rendered (so an edited template changes only these three terms)
    self_instruct = sum(
        _tokens(_render("self_instruct", examples=[s])) + 4 for s in ("Say hi.", "Count to three.")
    )
    evol = _tokens(_render("evol_deepen", instruction="Say hi.")) + 4
    pair = _tokens(_render("pairwise_score", JUDGE_TEMPLATES, instruction="", first="", second="")) + 4
    instructions = [2, 4, 4, 12, 12, 12]  # "Say hi.", "Count to three.", "Name a color.", 3 generated
    pairwise = 2 * sum(pair + p + 2 * 8 for p in instructions)
    assert sum(p + 4 for p in instructions) == 70
    assert got == {
        ("candidate_instructions", "self-instruct"): (
            2,
            self_instruct,
            24,
            round((self_instruct + 24) * 2e-6, 6),
        ),
        ("candidate_instructions", "evol-instruct"): (1, evol, 12, round((evol + 12) * 2e-6, 6)),
        ("candidate_instructions", "code problems"): (0, 0, 0, 0.0),
        ("candidate_responses", "responses (n=2)"): (6, 70, 96, 0.000332),
        # each answer after its instruction (p + 4 + a) and alone after BOS (a + 1)
        ("difficulty_scored", "IFD scoring (2 a row)"): (
            28,
            2 * sum(p + 21 for p in instructions) + (2 + 4 + 1 + 1 + 1) + (4 + 4 + 2 + 1 + 2),
            0,
            0.000366,
        ),
        ("judged_samples", "judge tiny (likelihood)"): (
            14,
            2 * sum(4 + p + 8 for p in instructions) + (4 + 2 + 1) + (4 + 4 + 2),
            0,
            0.001012,
        ),
        ("judged_samples", "pairwise tiny (both orders)"): (12, pairwise, 0, round(pairwise * 4e-6, 6)),
    }
    assert (self_instruct, evol, pairwise) == (142, 57, 1172)  # with today's templates
    assert report["total"]["requests"] == 63
    assert report["budget"] == {"tokens": 500.0}
    assert (
        report["over_budget"]
        == "the estimate passes the tokens budget (500) during difficulty_scored (IFD scoring (2 a row))"
    )
    assert not log.exists()  # no engine was asked
    assert not (project / ".ptf").exists()  # nothing staged, no Dagster run, no model converted
    table = ptf("run", "--seeds", str(seeds_file), "--dry-run")
    assert table.returncode == 0, table.stderr
    assert "nothing ran, no model loaded" in table.stdout and "candidate_responses" in table.stdout


def test_a_bad_budget_value_exits_2_with_one_line(ptf: Ptf, project: Path, seeds_file: Path) -> None:
    """Through the CLI (every other bad value: test_budget_stage.py)."""
    result = ptf("run", "--seeds", str(seeds_file), "--budget", "usd=0.5,tokens=abc")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert (
        "--budget: 'tokens' is 'abc'; give a whole number of tokens (e.g. --budget tokens=200000"
        in result.stderr
    )
    assert not (project / ".ptf" / "seeds").exists()
