"""CTranslate2 on the CPU (``backend: ctranslate2``): greedy chat and scoring of Llama-family models
through CTranslate2's own API (docs/engines.md has its figures beside the default's).

- Greedy chat (``temperature: 0``), ``score`` and ``choice_logprobs`` run on CTranslate2, in
  batches of prompts of similar length.
- Sampled chat (``temperature > 0``) and constrained JSON (``json_schema``) are delegated to the
  transformers backend on the same weights (loaded on first need). CTranslate2 4.8 draws samples
  from one random generator per worker thread, seeded once when the thread starts, so a
  request's text would depend on its batch and on every request before it (the contract is one
  seed per request, from (seed, request)); and its Python API has no logits-processor hook, so
  neither per-row seeded sampling nor a grammar mask can be applied to its decoding. Requests
  with ``tools`` go there too (the template renders them and the agent constrains the reply).
- Stop strings end a row as soon as its text holds one (a per-token callback), like
  transformers' ``stop_strings``; the text is cut before the stop.

Weights: the model's float32 conversion (:mod:`~ptfactory.engines.ct2_models`), computed in
``dtype`` (``auto``: float32; int8 and int8_float32 are faster but move scores, see
docs/engines.md), which is in the cache key and :meth:`identity`.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptfactory.engines.base import Completion, Conversation, Engine, Prompt, SamplingParams, TokenLogprobs
from ptfactory.engines.scoring import score_token_ids
from ptfactory.engines.weights import local_folder, model_fingerprint
from ptfactory.errors import EngineError

__all__ = ["CTranslate2Engine"]

_REVISION = "2"  # 2: the delegate is plain transformers
_COMPUTE_TYPES = ("float32", "int8", "int8_float32")
_FORWARD_FLOATS = 64 * 1024 * 1024  # logits held at once by choice_logprobs (256 MB of float32)


@dataclass
class CTranslate2Engine(Engine):
    model_path: str = "bundled"
    batch_size: int = 32  # EngineSpec's defaults (engines/spec.py says why)
    score_batch_size: int = 8
    dtype: str = "auto"  # the compute type
    threads: int | None = None
    streams: int | None = None  # its transformers delegate's (engines/streams.py)

    backend = "ctranslate2"
    supports_json_schema = True  # served by the transformers delegate
    _generator: Any = field(default=None, init=False, repr=False)
    _tokenizer: Any = field(default=None, init=False, repr=False)
    _delegate: Any = field(default=None, init=False, repr=False)

    def quantization(self) -> str:
        compute = "float32" if self.dtype == "auto" else self.dtype
        if compute not in _COMPUTE_TYPES:
            raise EngineError(
                f"ctranslate2 dtype {self.dtype!r} is not one of auto, {', '.join(_COMPUTE_TYPES)}"
            )
        return compute

    def weights_folder(self) -> Path | None:
        return local_folder(self.model_path)

    def weights_fingerprint(self) -> str:
        return model_fingerprint(self.model_path)

    def library(self) -> str:
        return f"ctranslate2=={importlib.metadata.version('ctranslate2')}"

    def engine_version(self) -> str:
        # sampled and constrained answers come from the transformers delegate: its versions count too
        from ptfactory.engines.transformers_engine import REVISION as delegate

        names = ("ctranslate2", "transformers", "torch")
        versions = " ".join(f"{n}={importlib.metadata.version(n)}" for n in names)
        return f"r{_REVISION}.{delegate} {versions}"

    def _load(self) -> tuple[Any, Any]:
        if self._generator is None:
            from transformers import AutoTokenizer

            from ptfactory.engines.ct2_models import (
                broken_on_ct2,
                ct2_model_dir,
                hf_folder,
                import_ctranslate2,
            )

            ctranslate2 = import_ctranslate2()
            reason = broken_on_ct2(self.model_path)
            if reason:
                raise EngineError(
                    f"model {self.model_path!r} does not run on backend ctranslate2: {reason}; "
                    "use backend: transformers (or auto, which picks it for this model)"
                )

            compute = self.quantization()
            folder = ct2_model_dir(self.model_path)
            source = (
                hf_folder(self.model_path) if not (Path(self.model_path) / "model.bin").is_file() else None
            )
            try:
                self._tokenizer = AutoTokenizer.from_pretrained(str(source or folder), local_files_only=True)
                self._generator = ctranslate2.Generator(
                    str(folder), device="cpu", compute_type=compute, intra_threads=self.threads or 0
                )
            except (OSError, ValueError, RuntimeError) as exc:
                raise EngineError(f"cannot load model {self.model_path!r} on ctranslate2: {exc}") from exc
        return self._generator, self._tokenizer

    def _transformers(self) -> Any:
        """The delegate for sampled and constrained requests: the same weights on transformers."""
        if self._delegate is None:
            from ptfactory.engines.transformers_engine import TransformersEngine

            if (Path(self.model_path) / "model.bin").is_file():
                raise EngineError(
                    f"{self.model_path} holds only a ctranslate2 model: sampled and JSON-constrained "
                    "requests need the HF folder it was converted from (give that folder as model)"
                )
            self._delegate = TransformersEngine(
                model_id=self.model_id,
                model_path=self.model_path,
                batch_size=self.batch_size,
                score_batch_size=self.score_batch_size,
                threads=self.threads,
                streams=self.streams,
            )
        return self._delegate

    # -- chat ------------------------------------------------------------------------------------

    @staticmethod
    def _delegated(params: SamplingParams) -> bool:
        return params.temperature > 0 or params.json_schema is not None or bool(params.tools)

    def _chat_many(
        self, conversations: Sequence[Conversation], params: Sequence[SamplingParams]
    ) -> list[list[Completion]]:
        """The delegate's requests in one call of its own (it batches differing settings together);
        greedy ones here, one call per setting."""
        delegated = [i for i, p in enumerate(params) if self._delegated(p)]
        if not delegated:
            return super()._chat_many(conversations, params)
        out: dict[int, list[Completion]] = dict(
            zip(
                delegated,
                self._transformers()._chat_many(
                    [conversations[i] for i in delegated], [params[i] for i in delegated]
                ),
                strict=True,
            )
        )
        rest = [i for i in range(len(params)) if i not in out]
        if rest:
            answers = super()._chat_many([conversations[i] for i in rest], [params[i] for i in rest])
            out.update(zip(rest, answers, strict=True))
        return [out[i] for i in range(len(params))]

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        if self._delegated(params):
            groups: list[list[Completion]] = self._transformers()._chat(conversations, params)
            return groups
        _, tokenizer = self._load()
        if tokenizer.chat_template is None:
            raise EngineError(
                f"model {self.model_path!r} has no chat template, so it cannot chat; use an "
                "instruct/chat model, or (judges) prompt: completion with scoring: probability"
            )
        prompts = [
            list(
                tokenizer.apply_chat_template(
                    list(c), add_generation_prompt=True, tokenize=True, return_dict=True
                )["input_ids"]
            )
            for c in conversations
        ]
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))  # less padding per batch
        results: dict[int, Completion] = {}
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            for i, completion in zip(batch, self._greedy([prompts[i] for i in batch], params), strict=True):
                results[i] = completion
        # greedy: the n samples of a request are one text (as transformers gives)
        return [[results[i]] * params.n for i in range(len(prompts))]

    def _greedy(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        generator, tokenizer = self._load()
        eos = sorted({t for t in (tokenizer.eos_token_id, tokenizer.pad_token_id) if t is not None})
        stops = params.stop
        texts: list[list[int]] = [[] for _ in prompts]
        stopped = [False] * len(prompts)

        def on_token(step: Any) -> bool:
            # stop strings: end the row once its text holds one (the text is cut below)
            if step.token_id in eos:
                return False
            texts[step.batch_id].append(step.token_id)
            text = tokenizer.decode(texts[step.batch_id], skip_special_tokens=True)
            done = any(s in text for s in stops)
            stopped[step.batch_id] = done
            return done

        results = generator.generate_batch(
            [tokenizer.convert_ids_to_tokens(p) for p in prompts],
            max_length=params.max_tokens,
            sampling_topk=1,
            include_prompt_in_result=False,
            end_token=eos,
            return_end_token=True,
            callback=on_token if stops else None,
        )
        completions = []
        for prompt, result, row_stopped in zip(prompts, results, stopped, strict=True):
            ids = list(result.sequences_ids[0])
            ended = bool(ids) and ids[-1] in eos
            generated = ids[:-1] if ended else ids
            text = tokenizer.decode(generated, skip_special_tokens=True)
            finish = "stop" if ended or row_stopped or len(generated) < params.max_tokens else "length"
            for stop in stops:
                if stop in text:
                    text, finish = text.split(stop, 1)[0], "stop"
            completions.append(Completion(text, len(prompt), len(generated), finish))
        return completions

    # -- scoring ---------------------------------------------------------------------------------

    def _score(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[TokenLogprobs]:
        generator, tokenizer = self._load()
        pairs = [score_token_ids(tokenizer, p, c) for p, c in zip(prompts, continuations, strict=True)]
        todo = [i for i, (_, cont) in enumerate(pairs) if cont]
        results: dict[int, TokenLogprobs] = {
            i: TokenLogprobs([], []) for i, (_, c) in enumerate(pairs) if not c
        }
        # log_probs[j] is the log-probability of token j + 1 given the tokens before it
        scored = generator.score_batch(
            [tokenizer.convert_ids_to_tokens(pairs[i][0] + pairs[i][1]) for i in todo],
            max_batch_size=self.score_batch_size,
            max_input_length=0,
        )
        for i, result in zip(todo, scored, strict=True):
            context, cont = pairs[i]
            picked = result.log_probs[len(context) - 1 : len(context) - 1 + len(cont)]
            results[i] = TokenLogprobs([tokenizer.decode([t]) for t in cont], [float(x) for x in picked])
        return [results[i] for i in range(len(pairs))]

    def _choice_logprobs(self, prompts: Sequence[Prompt], choices: Sequence[str]) -> list[list[float]]:
        """One forward pass per prompt batch when every choice is one distinct token after the
        prompt (digits are, in the bundled tokenizers); otherwise one scored continuation each."""
        import numpy as np

        generator, tokenizer = self._load()
        contexts = [score_token_ids(tokenizer, p, choices[0])[0] for p in prompts]
        ids = [score_token_ids(tokenizer, prompts[0], c)[1] for c in choices] if prompts else []
        if not prompts or any(len(i) != 1 for i in ids) or len({i[0] for i in ids}) != len(ids):
            return super()._choice_logprobs(prompts, choices)
        wanted = [i[0] for i in ids]
        vocab = len(tokenizer)
        order = sorted(range(len(prompts)), key=lambda i: len(contexts[i]))
        results: dict[int, list[float]] = {}
        start = 0
        while start < len(order):
            # as many prompts as fit the logits budget (all positions' logits come back)
            end = start + 1
            while (
                end < len(order)
                and end - start < self.score_batch_size
                and (end + 1 - start) * len(contexts[order[end]]) * vocab <= _FORWARD_FLOATS
            ):
                end += 1
            batch = order[start:end]
            logprobs = np.asarray(
                generator.forward_batch([contexts[i] for i in batch], return_log_probs=True)
            )
            for row, i in enumerate(batch):
                results[i] = [float(x) for x in logprobs[row, len(contexts[i]) - 1, wanted]]
            start = end
        return [results[i] for i in range(len(prompts))]

    def count_tokens(self, prompts: Sequence[Prompt]) -> list[int]:
        """Exactly the context tokens scoring feeds the model for each prompt (budgets, stats)."""
        _, tokenizer = self._load()
        return [len(score_token_ids(tokenizer, p, "")[0]) for p in prompts]

    def close(self) -> None:
        if self._delegate is not None:
            self._delegate.close()
        self._generator = None
        self._tokenizer = None
        self._delegate = None
