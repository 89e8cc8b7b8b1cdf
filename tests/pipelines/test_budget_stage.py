"""A stage under a budget, on the real engine (tiny model), response cache and ledger: it stops
sending at the limit, keeps what finished, marks the rest, and a rerun sends only the rest.
The `--budget` syntax and its errors. (The whole run through Dagster: test_budget_run.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from ptfactory.assets.budget import metered, within_budget
from ptfactory.assets.generation import instructions_within_budget
from ptfactory.config import parse_config
from ptfactory.engines.budget import (
    BudgetConfig,
    BudgetExhausted,
    BudgetGuard,
    BudgetLedger,
    effective_budget,
    parse_budget_option,
)
from ptfactory.engines.cache import ResponseCache
from ptfactory.engines.transformers_engine import TransformersEngine
from ptfactory.errors import ConfigError
from ptfactory.generators.config import GenerationConfig, SamplingConfig
from ptfactory.generators.instructions import generate_instructions
from ptfactory.generators.responses import generate_responses
from ptfactory.generators.seeds import SeedTask, seeds_to_table
from ptfactory.storage.schema import from_records, live_rows
from tests.conftest import make_rows

PRICE = 2.0  # $ per million tokens


def _guard(ledger: BudgetLedger, run: str, **limits: float) -> BudgetGuard:
    budget = BudgetConfig.model_validate(limits)
    return BudgetGuard(budget, ledger, run_id=run, batch="b1", asset="candidate_responses")


def _respond(
    engine: TransformersEngine, guard: BudgetGuard, instructions: pa.Table
) -> tuple[tuple[pa.Table, Any], pa.Table]:
    sampling = SamplingConfig(n=1, max_tokens=6)
    with metered(guard, [(engine, PRICE)]):
        return within_budget(
            guard,
            [engine],
            instructions,
            lambda rows: generate_responses(rows, from_records([]), engine, sampling),
            stage="respond",
            domain=live_rows(instructions),
        )


def test_a_stage_stops_at_its_budget_keeps_what_finished_and_a_rerun_sends_only_the_rest(
    tiny_model: Path, tmp_path: Path
) -> None:
    cache = ResponseCache(tmp_path / "responses.sqlite")
    engine = TransformersEngine(model_id="tiny", model_path=str(tiny_model), cache=cache, chunk_size=2)
    ledger = BudgetLedger(tmp_path / "budget.sqlite")
    instructions = make_rows(6)

    guard = _guard(ledger, "r1", tokens=1)  # the first chunk starts under it; nothing after it
    (table, _), unfinished = _respond(engine, guard, instructions)
    assert engine.stats.requests_sent == 2  # one chunk, then the engine sent nothing more
    assert table.num_rows == 2 and unfinished.num_rows == 4
    for trail in unfinished.column("decisions").to_pylist():
        assert trail[-1]["stage"] == "respond" and trail[-1]["verdict"] == "drop"
        assert trail[-1]["reason"] == "budget_exhausted" and "tokens" in trail[-1]["detail"]
    spent = ledger.spent(run_id="r1")
    counted = engine.stats.prompt_tokens + engine.stats.completion_tokens
    assert spent.tokens == counted > 0  # the engine's own counts of what it sent
    assert spent.usd == pytest.approx(counted * PRICE / 1e6)
    assert guard.stopped is not None and guard.stopped.startswith("tokens")
    assert ledger.stops("r1") == [("candidate_responses", guard.stopped)]
    assert ledger.stops("r1", guard.batch) == ledger.stops("r1") and ledger.stops("r1", "another") == []

    # a rerun with a larger budget: the finished chunk comes from the cache, the rest is sent
    rerun = _guard(ledger, "r2", tokens=1_000_000)
    (full, _), left = _respond(engine, rerun, instructions)
    assert left.num_rows == 0 and full.num_rows == 6
    assert engine.stats.requests_sent == 2 + 4 and engine.stats.cache_hits >= 2
    assert full.slice(0, 2).column("messages").to_pylist() == table.column("messages").to_pylist()
    assert (
        ledger.spent(run_id="r2").tokens
        == engine.stats.prompt_tokens + engine.stats.completion_tokens - counted
    )
    assert (
        ledger.spent(batch="b1").tokens == ledger.spent(run_id="r1").tokens + ledger.spent(run_id="r2").tokens
    )


def test_a_zero_budget_answers_from_the_cache_alone(tiny_model: Path, tmp_path: Path) -> None:
    """A batch limit counts every run of the batch; cache hits cost nothing, so what finished before
    still comes back at a budget of zero, and no request is sent."""
    engine = TransformersEngine(
        model_id="tiny", model_path=str(tiny_model), cache=ResponseCache(tmp_path / "c.sqlite"), chunk_size=2
    )
    ledger = BudgetLedger(tmp_path / "budget.sqlite")
    _respond(engine, _guard(ledger, "r1"), make_rows(2))  # no limit: two rows finish, spending recorded
    assert ledger.spent(batch="b1").tokens > 0
    sent = engine.stats.requests_sent
    (table, _), unfinished = _respond(engine, _guard(ledger, "r2", batch_tokens=1), make_rows(4))
    assert engine.stats.requests_sent == sent  # nothing sent: the batch was already past its limit
    assert table.num_rows == 2 and unfinished.num_rows == 2  # the cached two finished anyway
    assert ledger.spent(run_id="r2").tokens == 0


def test_instruction_generation_stopped_by_its_budget_keeps_the_instructions_that_finished(
    tiny_model: Path, tmp_path: Path
) -> None:
    """Instructions are not rows yet: the stage keeps the most of each method's count that finished
    (a smaller count asks a prefix of the same requests) and asks for none of the rest."""
    engine = TransformersEngine(
        model_id="tiny", model_path=str(tiny_model), cache=ResponseCache(tmp_path / "c.sqlite"), chunk_size=1
    )
    tasks = [
        SeedTask(f"s{i}", f"Write a poem about the number {i}.", "sft", f"seeds.jsonl:{i}") for i in range(3)
    ]
    seeds = seeds_to_table(tasks, "b1")
    config = GenerationConfig.model_validate(
        {"self_instruct": {"count": 3}, "evol_instruct": {"count": 2}, "instructions": {"max_tokens": 6}}
    )
    guard = BudgetGuard(
        BudgetConfig(tokens=1), BudgetLedger(tmp_path / "b.sqlite"), "r1", "b1", "candidate_instructions"
    )
    with metered(guard, [(engine, PRICE)]), pytest.raises(BudgetExhausted):
        generate_instructions(seeds, engine, config, "b1")
    with metered(guard, [(engine, PRICE)]):
        (table, _), done = instructions_within_budget(guard, engine, seeds, config, "b1")
    assert engine.stats.requests_sent == 1 and done == {"self_instruct": 1, "evol_instruct": 0, "code": 2}
    one = config.model_copy(
        update={
            "self_instruct": config.self_instruct.model_copy(update={"count": 1}),
            "evol_instruct": config.evol_instruct.model_copy(update={"count": 0}),
        }
    )
    alone, _ = generate_instructions(seeds, engine, one, "b1")  # from the cache: the same request
    assert engine.stats.requests_sent == 1
    assert table.column("sample_id").to_pylist() == alone.column("sample_id").to_pylist()
    methods = [(p or {}).get("method") for p in table.column("provenance").to_pylist()]
    assert sorted(methods) == ["seed", "seed", "seed", "self_instruct"]  # the seeds, the one reply


def test_budget_option_syntax() -> None:
    assert parse_budget_option(["tokens=200000"]) == {"tokens": 200_000}
    assert parse_budget_option(["usd=0.5,publish_partial=true", "batch_tokens=1_000"]) == {
        "usd": 0.5,
        "publish_partial": True,
        "batch_tokens": 1000,
    }
    config = parse_config({"budget": {"tokens": 10, "usd": 1.0}})
    merged = effective_budget(config.budget, '{"tokens": 99}')
    assert merged.tokens == 99 and merged.usd == 1.0 and not merged.publish_partial
    # the budget is not part of the config hash: it does not change what a version holds
    assert config.config_hash() == parse_config({}).config_hash()


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            "tokens=abc",
            "--budget: 'tokens' is 'abc'; give a whole number of tokens (e.g. --budget tokens=200000",
        ),
        ("usd=1e", "--budget: 'usd' is '1e'; give a number of dollars"),
        (
            "token=5",
            "--budget: unknown key 'token'; allowed: tokens, usd, batch_tokens, batch_usd, publish_partial",
        ),
        ("usd=-1", "--budget: 'usd' is -1.0: Input should be greater than or equal to 0"),
        ("tokens", "--budget: 'tokens' is not key=value"),
        ("publish_partial=maybe", "--budget: 'publish_partial' is 'maybe'; give true or false"),
    ],
)
def test_bad_budget_option_names_the_key_and_the_fix(given: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_budget_option([given])
    assert str(raised.value).startswith(message), str(raised.value)
    assert "\n" not in str(raised.value)


def test_bad_budget_in_factory_yaml_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^factory.yaml: 'budget.tokens' is -5: Input should be greater"):
        parse_config({"budget": {"tokens": -5}})
    with pytest.raises(ConfigError, match=r"unknown key 'budget.token'; allowed under 'budget': tokens, usd"):
        parse_config({"budget": {"token": 5}})
