"""``ptf run --dry-run``: the requests, tokens and dollars a run would spend, per stage, from the
configuration and the seeds alone (nothing runs, no model is loaded, no engine is asked).

Every count is an upper bound for a first run: every generated instruction is taken to be kept,
every reply to run to its ``max_tokens``, every row to reach every stage. A generated text is
counted at its ``max_tokens``; a text the seeds hold is counted at about 4 characters a token,
plus a few tokens a chat message (``engines/budget.py: estimate_tokens``). Prompts are the real
templates rendered around those texts. Dollars are each engine's tokens at its
``price_per_mtok``. A rerun costs less: cache hits are free.

The seeds are the file's and, where factory.yaml's ``seeds.procedural`` names reasoning-gym
families, the procedural tasks a batch adds to them (drawn here as the run draws them: no model).

Stages: instructions (self-instruct, evol-instruct, code problems), responses, difficulty (the
student's attempts for pass-rate rows: code, and the math rows, whose seed has a reference answer
the answer or procedural verifier checks; IFD scoring: two scored requests a row, a pass-rate row
counted there too, as it falls back to IFD when its response states no final answer), judges (one
request a row per LLM judge: a decoded JSON vote, probability or likelihood scoring; and the
pairwise comparisons of each instruction's best and worst answer, both orders), and agent
rollouts where factory.yaml's ``agent.tasks`` names task files (every episode to its step budget).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ptfactory.annotators.judges.likelihood import LIKELIHOOD_METHODS
from ptfactory.annotators.judges.llm import TEMPLATES as JUDGE_TEMPLATES
from ptfactory.config import FactoryConfig, JudgeSpec
from ptfactory.engines.budget import MESSAGE_TOKENS, estimate_tokens
from ptfactory.engines.spec import EngineSpec
from ptfactory.generators.agent.policy import system_prompt
from ptfactory.generators.agent.tasks import read_tasks
from ptfactory.generators.prompts import template
from ptfactory.generators.seeds import SeedTask

__all__ = ["Estimate", "estimate_run", "over_budget"]

_SERVED = ("vllm", "openai")  # as LLMJudge.method: auto is json where a server constrains JSON


@dataclass
class Estimate:
    stage: str  # the asset
    part: str
    engine: str  # backend:model
    requests: int
    prompt_tokens: int
    completion_tokens: int
    usd: float

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tokens": self.tokens}


def _rendered(name: str, folder: Any = None, **values: Any) -> int:
    """Tokens of a template rendered around empty values: what it adds to the texts put in it."""
    found = template(name, folder) if folder is not None else template(name)
    return estimate_tokens(found.render(**values))


def _line(where: tuple[str, str], spec: EngineSpec, requests: int, prompt: int, completion: int) -> Estimate:
    usd = (prompt + completion) * spec.price_per_mtok / 1e6
    stage, part = where
    return Estimate(
        stage, part, f"{spec.backend}:{spec.model_id}", requests, prompt, completion, round(usd, 6)
    )


def _chat(tokens: int) -> int:
    """A one-message conversation around ``tokens`` of text."""
    return tokens + MESSAGE_TOKENS


def estimate_run(config: FactoryConfig, tasks: list[SeedTask], root: Path = Path()) -> list[Estimate]:
    """One line per stage and part, in the order a run spends them (``root``: factory.yaml's folder,
    where relative agent task files are)."""
    gen = config.generation
    tasks = [*tasks, *_procedural(config)]
    lines, new_sft, new_code = _instructions(config, tasks)
    lines += _agent(config, root)
    # candidate_responses: every instruction (the seeds' and the new ones) answered n times
    seeds = tasks if gen.include_seeds else []
    wrap = _rendered("respond_code", prompt="")  # a code prompt is asked inside this template
    # the prompts by the difficulty stage's kind: math is an sft seed with a reference answer
    prompts: dict[str, list[int]] = {"sft": [], "math": [], "code": []}
    for t in seeds:
        prompts[_kind(t)].append((wrap if t.kind == "code" else 0) + estimate_tokens(t.prompt))
    prompts["sft"] += new_sft
    prompts["code"] += [wrap + p for p in new_code]
    n, answer = gen.responses.n, gen.responses.max_tokens
    asked = [p for ps in prompts.values() for p in ps]
    prompt = sum(map(_chat, asked))
    where = ("candidate_responses", f"responses (n={n})")
    lines.append(_line(where, config.engines.generator, len(asked), prompt, len(asked) * n * answer))

    # each answer row: (its prompt's tokens, its answer's tokens, kind); references are the seeds'
    rows = [(p, answer, kind) for kind, ps in prompts.items() for p in ps for _ in range(n)]
    references = [t for t in seeds if t.response is not None]
    for t in references:
        rows.append(
            (
                (wrap if t.kind == "code" else 0) + estimate_tokens(t.prompt),
                estimate_tokens(t.response or ""),
                _kind(t),
            )
        )
    lines += _difficulty(config, rows, prompts)
    # the pairwise candidates: sft instructions with two answers or more (n >= 2, or a reference)
    referenced = [estimate_tokens(t.prompt) for t in references if t.kind == "sft"]
    pairs = prompts["sft"] + prompts["math"] if n >= 2 else referenced if n == 1 else []
    longest = max([answer, *(a for _, a, _ in rows)])
    lines += _judges(config, rows, [p + 2 * longest for p in pairs])
    return lines


def _kind(task: SeedTask) -> str:
    """The difficulty stage's kind of a seed's rows: ``math`` for an sft seed whose reference has an
    answer (given, marked in its response, or a procedural task's), else its own kind."""
    if task.kind != "sft":
        return task.kind
    reference = task.reference()
    return "math" if reference is not None and reference.get("answer") is not None else "sft"


def _procedural(config: FactoryConfig) -> list[SeedTask]:
    """The procedural tasks ``seeds.procedural`` adds to every batch's seeds (none where it names
    no family)."""
    section = config.seeds.procedural
    if not section.datasets:
        return []
    from ptfactory.generators.procedural import procedural_seed_tasks

    return procedural_seed_tasks(section, config.seeds.max_field_chars)


def _instructions(
    config: FactoryConfig, tasks: list[SeedTask]
) -> tuple[list[Estimate], list[int], list[int]]:
    """candidate_instructions, from the seeds' texts in the real templates; and the new sft and code
    instructions' tokens (each at its max_tokens)."""
    gen, generator = config.generation, config.engines.generator
    sft = [t for t in tasks if t.kind == "sft"]
    code = [t for t in tasks if t.kind == "code"]
    pool = sft or tasks
    asked = gen.self_instruct.count if pool else 0
    k = min(gen.self_instruct.examples, len(pool))
    # each prompt shows k seed tasks (sampled in a run; here in turn)
    shown = [[pool[(i * k + j) % len(pool)].prompt for j in range(k)] for i in range(asked)]
    prompt = sum(_chat(_rendered("self_instruct", examples=e)) for e in shown)
    most = gen.instructions.max_tokens
    lines = [_line(("candidate_instructions", "self-instruct"), generator, asked, prompt, asked * most)]
    evolved = sft[: gen.evol_instruct.count]
    ops = gen.evol_instruct.operations
    prompt = sum(
        _chat(_rendered(f"evol_{ops[i % len(ops)]}", instruction=t.prompt)) for i, t in enumerate(evolved)
    )
    lines.append(
        _line(
            ("candidate_instructions", "evol-instruct"), generator, len(evolved), prompt, len(evolved) * most
        )
    )
    chosen = [code[i % len(code)] for i in range(gen.code.count)] if code else []
    prompt = sum(_chat(_rendered("code_problem", prompt=t.prompt, tests=t.tests or "")) for t in chosen)
    longest = gen.code_problems.max_tokens
    lines.append(
        _line(
            ("candidate_instructions", "code problems"), generator, len(chosen), prompt, len(chosen) * longest
        )
    )
    return lines, [most] * (asked + len(evolved)), [longest] * len(chosen)


def _difficulty(
    config: FactoryConfig, rows: list[tuple[int, int, str]], prompts: dict[str, list[int]]
) -> list[Estimate]:
    settings, student = config.difficulty, config.engines.student
    methods = {str(k): str(v) for k, v in settings.methods.items()}
    if "math" not in methods:  # math rows are sft rows, scored as sft is (filters/difficulty/score.py)
        methods["math"] = methods.get("sft", "none")
    lines = []
    attempts = [p for kind, ps in prompts.items() if methods.get(kind) == "pass_rate" for p in ps]
    if attempts:  # k answers per distinct prompt (code in the sandbox, math by its final number)
        lines.append(
            _line(
                ("difficulty_scored", f"student attempts (k={settings.k})"),
                student,
                len(attempts),
                sum(map(_chat, attempts)),
                len(attempts) * settings.k * settings.max_tokens,
            )
        )
    # a pass-rate row whose response states no final answer is scored by IFD instead: counted here too
    ifd = [
        (p, a)
        for p, a, kind in rows
        if methods.get(kind) == "ifd" or (kind != "code" and methods.get(kind) == "pass_rate")
    ]
    if ifd:  # the answer scored after its instruction, and alone (after BOS): prefill only
        read = sum(_chat(p) + a + 1 + a for p, a in ifd)
        lines.append(_line(("difficulty_scored", "IFD scoring (2 a row)"), student, 2 * len(ifd), read, 0))
    return lines


def _judge_method(spec: JudgeSpec, engine: EngineSpec) -> str:
    if spec.scoring != "auto":
        return spec.scoring
    return "json" if engine.backend in _SERVED and spec.prompt == "chat" else "probability"


def _judges(config: FactoryConfig, rows: list[tuple[int, int, str]], pairs: list[int]) -> list[Estimate]:
    """``pairs``: the texts of each candidate pair (its instruction and two answers, at most)."""
    lines = []
    for spec in config.judges:
        if spec.type != "llm":
            continue
        engine = spec.engine or config.engines.generator
        method = _judge_method(spec, engine)
        completion = spec.prompt == "completion"
        if method in LIKELIHOOD_METHODS:  # the answer after the instruction (completion: "Question:")
            frame = estimate_tokens("Question: \nAnswer: ") if completion else MESSAGE_TOKENS
            prompt = sum(frame + p + a for p, a, _ in rows)
            if method == "pmi":  # and again after the same frame with no instruction
                prompt += sum(frame + a for _, a, _ in rows)
            lines.append(
                _line(("judged_samples", f"judge {spec.name} ({method})"), engine, len(rows), prompt, 0)
            )
        else:
            name = (
                f"{spec.rubric}_fewshot"
                if completion
                else spec.rubric
                if method == "json"
                else f"{spec.rubric}_score"
            )
            overhead = _rendered(name, JUDGE_TEMPLATES, instruction="", response="") + (
                0 if completion else MESSAGE_TOKENS
            )
            prompt = sum(overhead + p + a for p, a, _ in rows)
            decoded = len(rows) * spec.max_tokens if method == "json" else 0
            lines.append(
                _line(("judged_samples", f"judge {spec.name} ({method})"), engine, len(rows), prompt, decoded)
            )
        if pairs:  # both orders of each instruction's best and worst answer
            name = "pairwise_fewshot" if completion else "pairwise_score"
            overhead = _rendered(name, JUDGE_TEMPLATES, instruction="", first="", second="") + (
                0 if completion else MESSAGE_TOKENS
            )
            prompt = 2 * sum(overhead + texts for texts in pairs)
            lines.append(
                _line(
                    ("judged_samples", f"pairwise {spec.name} (both orders)"),
                    engine,
                    2 * len(pairs),
                    prompt,
                    0,
                )
            )
    return lines


_TOOL_OUTPUT_CHARS = 1500  # of a tool's output an agent sees (generators/agent/rollout.py)


def _agent(config: FactoryConfig, root: Path) -> list[Estimate]:
    """Agent rollouts: per task, ``agent.rollouts`` episodes of up to its step budget. The first
    step is one request (every episode's conversation is the same, asked with n = rollouts); each
    later one a request per episode, its prompt grown by every earlier reply (at max_tokens) and
    tool output (at most 1,500 characters shown)."""
    settings = getattr(config, "agent", None)  # the section the agent stages read, where it exists
    if settings is None or not settings.tasks:
        return []
    requests = prompt = completion = 0
    rollouts, most = settings.rollouts, settings.max_tokens
    turn = most + estimate_tokens("x" * _TOOL_OUTPUT_CHARS) + 2 * MESSAGE_TOKENS
    for name in settings.tasks:
        for task in read_tasks(path if (path := Path(name)).is_absolute() else root / path):
            steps = min(settings.max_steps or task.max_steps, task.max_steps)
            system = system_prompt(task) + json.dumps(task.tools)
            base = estimate_tokens([{"content": system}, {"content": task.instruction}])
            requests += 1 + (steps - 1) * rollouts
            prompt += base + sum(rollouts * (base + step * turn) for step in range(1, steps))
            completion += rollouts * steps * most
    where = ("agent_trajectories", f"rollouts (n={rollouts})")
    return [_line(where, config.engines.generator, requests, prompt, completion)]


def over_budget(lines: list[Estimate], limits: dict[str, float]) -> str | None:
    """Where the estimate first passes a run limit (tokens or usd), as a sentence; None if it fits."""
    spent_tokens, spent_usd = 0, 0.0
    for line in lines:
        spent_tokens += line.tokens
        spent_usd += line.usd
        for key, spent in (("tokens", spent_tokens), ("usd", spent_usd)):
            if key in limits and spent > limits[key]:
                return f"the estimate passes the {key} budget ({limits[key]:,.6g}) during {line.stage} ({line.part})"
    return None
