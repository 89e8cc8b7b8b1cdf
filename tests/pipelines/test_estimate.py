"""``ptf run --dry-run``'s estimate counts the rows the difficulty stage measures by the student's
pass rate: math seeds (a reference answer) and procedural seeds (as ``ptf seeds procedural`` writes
them), not only code; the CLI's numbers through a real run of the command: test_budget_run.py."""

from __future__ import annotations

from typing import Any

from ptfactory.config import parse_config
from ptfactory.engines.budget import MESSAGE_TOKENS, estimate_tokens
from ptfactory.generators.procedural import draw_seed_rows
from ptfactory.generators.seeds import parse_seed
from ptfactory.pipelines.estimate import estimate_run

K, MOST, ANSWER, NEW = 2, 16, 8, 12


def _config(**difficulty: Any) -> Any:
    return parse_config(
        {
            "generation": {
                "self_instruct": {"count": 1, "examples": 1},
                "evol_instruct": {"count": 0},
                "code": {"count": 0},
                "instructions": {"max_tokens": NEW},
                "responses": {"n": 1, "max_tokens": ANSWER},
            },
            "difficulty": {"k": K, "max_tokens": MOST, **difficulty},
            "judges": [{"name": "relevance", "type": "relevance"}],
        }
    )


def _parts(lines: list[Any]) -> dict[str, tuple[int, int, int]]:
    return {
        x.part: (x.requests, x.prompt_tokens, x.completion_tokens)
        for x in lines
        if x.stage == "difficulty_scored"
    }


def test_math_and_procedural_seeds_are_counted_as_the_student_attempts_them() -> None:
    plain = parse_seed("seeds.jsonl:1", {"instruction": "Name a color."})
    math = parse_seed("seeds.jsonl:2", {"instruction": "What is 9 + 9?", "answer": "18"})
    procedural = parse_seed("seeds.jsonl:3", draw_seed_rows(["basic_arithmetic"], 1)[0])
    tasks = [plain, math, procedural]
    chat = [estimate_tokens(t.prompt) + MESSAGE_TOKENS for t in tasks]

    parts = _parts(estimate_run(_config(), tasks))
    # k answers to each of the two checkable prompts at difficulty's max_tokens; every sft row
    # (the plain seed's, the new instruction's, and the checkable ones: without a final answer in
    # their response they fall back to IFD) is also counted for IFD, two prefills a row
    assert parts["student attempts (k=2)"] == (2, chat[1] + chat[2], 2 * K * MOST)
    ifd_prompts = [*chat, NEW + MESSAGE_TOKENS]
    assert parts["IFD scoring (2 a row)"] == (2 * 4, sum(p + 2 * ANSWER + 1 for p in ifd_prompts), 0)

    # without a `math` method the stage scores those rows as sft (IFD): no student attempts
    no_math = _parts(estimate_run(_config(methods={"sft": "ifd", "code": "pass_rate"}), tasks))
    assert set(no_math) == {"IFD scoring (2 a row)"}
    assert no_math["IFD scoring (2 a row)"] == parts["IFD scoring (2 a row)"]
    # nothing checkable: the plain seed alone is not attempted
    assert "student attempts (k=2)" not in _parts(estimate_run(_config(), [plain]))


def test_the_procedural_section_adds_its_tasks_to_the_seeds() -> None:
    """``seeds.procedural`` (where it names families) draws its tasks as a batch does:
    they are answered, attempted by the student and scored like the file's own seeds."""
    from ptfactory.generators.procedural import ProceduralSeeds, procedural_seed_tasks

    plain = parse_seed("seeds.jsonl:1", {"instruction": "Name a color."})
    section = ProceduralSeeds(datasets=["basic_arithmetic", "chain_sum"], count=2)
    config = _config()
    with_section = config.model_copy(
        update={"seeds": config.seeds.model_copy(update={"procedural": section})}
    )
    drawn = procedural_seed_tasks(section)
    assert len(drawn) == 4
    assert estimate_run(with_section, [plain]) == estimate_run(config, [plain, *drawn])
    assert _parts(estimate_run(with_section, [plain]))["student attempts (k=2)"][0] == 4
