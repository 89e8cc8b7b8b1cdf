"""The embedded default engine: Hugging Face transformers on the CPU (or one GPU), through its
public API only: ``generate`` with a ``LogitsProcessor`` and a ``StoppingCriteria`` per batch, and
plain forward passes for scoring. No patched modules, no private classes, no compiled code.

- Generation: each fixed request chunk becomes one row per sample, cut into near-equal batches of
  rows of similar budget and prompt length (less padding), each batch one ``generate`` call
  (left-padded, greedy over the logits :class:`~ptfactory.engines.processors.RowRules` leaves).
  Sampled rows draw with ``torch.multinomial`` from a generator of their own, seeded from
  (seed, request), so a request's text does not depend on its batch (the sampling contract,
  docs/engines.md). Requests of different settings (``chat_many``: budgets, temperatures,
  schemas, tools) share batches: each row picks and ends by its own rule.
- Batches run two side by side on a CPU with 2+ threads, each on half of them
  (:mod:`~ptfactory.engines.streams`): a few-row decoding step leaves a core idle.
- Constrained JSON (``supports_json_schema``): ``params.json_schema`` masks every token the
  schema does not allow (llguidance, a matcher per row), so a reply that finishes
  (``finish_reason`` ``stop``) parses and validates; one cut by ``max_tokens`` says ``length``.
  Stop strings are not applied to constrained replies (the grammar decides where the JSON ends).
- Scoring: batches of (prompt, continuation) left-padded, so every continuation ends the row and
  ``logits_to_keep`` computes the vocabulary head on the batch's last positions only (the last one
  alone for ``choice_logprobs``); batches are cut so the kept logits fit a budget (Gemma 3's
  vocabulary is 262k wide).

Numerics: float32 on a CPU by default, whatever its instruction set (bfloat16 and the packed
paths that depended on CPU flags are gone), so scores agree within tests/engines/test_isa.py's
epsilon on AVX2 and AVX-512; the dtype is in the cache key and :meth:`Engine.identity`.
A model without a chat template (a base model) can score string prompts but not chat.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ptfactory.engines.base import (
    Completion,
    Conversation,
    Engine,
    Prompt,
    SamplingParams,
    TokenLogprobs,
    request_seeds,
    tool_call_messages,
)
from ptfactory.engines.bundled import resolve_model_path
from ptfactory.engines.scoring import left_padded, score_token_ids
from ptfactory.engines.streams import auto_streams, balanced_batches, dealt_batches, run_streams
from ptfactory.engines.weights import local_folder, model_fingerprint
from ptfactory.errors import EngineError

__all__ = ["TransformersEngine"]


# Bumped when this engine's outputs change for the same request (e.g. how sampling is seeded),
# so the cache does not serve the old behaviour's answers.
REVISION = "7"  # 7: transformers' generate and forward only; float32 on every CPU
# Logits held at once by a scoring batch (512 MB of float32, and as much again while reduced)
LOGIT_FLOATS = 128 * 1024 * 1024


def _stops(params: SamplingParams) -> tuple[str, ...]:
    """Stop strings apply to free replies; a constrained one ends where its grammar does."""
    return params.stop if params.json_schema is None else ()


def _ids(value: int | list[int] | None) -> list[int]:
    """A generation config's ``eos_token_id``: one id, a list of them, or none."""
    return [] if value is None else [value] if isinstance(value, int) else list(value)


@dataclass
class TransformersEngine(Engine):
    model_path: str = "bundled"
    batch_size: int = 32  # EngineSpec's defaults (engines/spec.py says why)
    score_batch_size: int = 8
    device: str = "cpu"
    dtype: str = "auto"  # float32 on CPU, bfloat16 on GPU
    threads: int | None = None
    streams: int | None = None  # batches run side by side on the CPU (None: engines/streams.py)

    backend = "transformers"
    supports_json_schema = True
    _model: Any = field(default=None, init=False, repr=False)
    _tokenizer: Any = field(default=None, init=False, repr=False)
    _grammars: Any = field(default=None, init=False, repr=False)

    def _dtype(self) -> str:
        auto = "float32" if self.device == "cpu" else "bfloat16"
        return auto if self.dtype == "auto" else self.dtype

    def quantization(self) -> str:
        return self._dtype()

    def weights_folder(self) -> Path | None:
        return local_folder(self.model_path)

    def weights_fingerprint(self) -> str:
        return model_fingerprint(self.model_path)

    def engine_version(self) -> str:
        versions = (importlib.metadata.version(p) for p in ("transformers", "torch"))
        return f"r{REVISION} transformers={next(versions)} torch={next(versions)}"

    def library(self) -> str:
        return f"transformers=={importlib.metadata.version('transformers')}"

    def device_name(self) -> str:
        return self.device

    def _load(self) -> tuple[Any, Any]:
        if self._model is None:
            import torch
            import transformers
            from transformers import AutoModelForCausalLM, AutoTokenizer

            transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # ptf shows progress
            if self.threads:
                torch.set_num_threads(self.threads)
            path = resolve_model_path(self.model_path)
            # a folder loads from disk alone (no hub calls); a hub id is fetched as usual
            local = Path(path).is_dir()
            try:
                tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local)
                model: Any = AutoModelForCausalLM.from_pretrained(
                    path, dtype=getattr(torch, self._dtype()), local_files_only=local
                )
            except OSError as exc:
                raise EngineError(f"cannot load model {path!r}: {exc}") from exc
            tokenizer.padding_side = "left"
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            self._model = model.to(self.device).eval()
            self._tokenizer = tokenizer
        return self._model, self._tokenizer

    def _threads(self) -> int:
        import torch

        return self.threads or torch.get_num_threads()

    def _streams(self) -> int:
        return self.streams or auto_streams(self.device, self._threads())

    # -- chat ------------------------------------------------------------------------------------

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        return self._chat_many(conversations, [params] * len(conversations))

    def _chat_many(
        self, conversations: Sequence[Conversation], params: Sequence[SamplingParams]
    ) -> list[list[Completion]]:
        import torch

        model, tokenizer = self._load()
        if tokenizer.chat_template is None:
            raise EngineError(
                f"model {self.model_path!r} has no chat template, so it cannot chat; use an "
                "instruct/chat model, or (judges) prompt: completion with scoring: probability"
            )
        if any(p.seed is None for p in params):
            drawn = int(torch.randint(0, 2**62, ()).item())
            params = [replace(p, seed=drawn) if p.seed is None else p for p in params]
        conversations = [
            tool_call_messages(c) if p.tools else c for c, p in zip(conversations, params, strict=True)
        ]
        # one row per sample, each with its own seed (from the request): a request's text does not
        # depend on the batch its rows land in, so rows of similar length share one (less padding)
        rows = [
            (i, seed)
            for i, (c, p) in enumerate(zip(conversations, params, strict=True))
            for seed in request_seeds(p, c)
        ]
        texts = [
            tokenizer.apply_chat_template(list(c), tools=p.tools, add_generation_prompt=True, tokenize=False)
            for c, p in zip(conversations, params, strict=True)
        ]
        order = sorted(
            range(len(rows)), key=lambda r: (params[rows[r][0]].max_tokens, len(texts[rows[r][0]]))
        )
        # a batch decodes until its longest budget: rows of different budgets are dealt out over
        # the batches, so the streams end together
        cut = balanced_batches if len({params[i].max_tokens for i, _ in rows}) <= 1 else dealt_batches
        batches = cut(order, self.batch_size, self._streams())
        if self._grammars is None and any(p.json_schema is not None for p in params):
            from ptfactory.engines.constrained import GrammarCache

            self._grammars = GrammarCache(tokenizer, int(model.config.vocab_size))
        rules = [self._rule(params[i], seed) for i, seed in rows]  # grammars compiled here, once
        # tokenized here, before the streams start: a fast tokenizer set to pad cannot be shared
        encoded = [self._encode([texts[rows[r][0]] for r in b]) for b in batches]
        eos = self._eos()
        jobs = [
            functools.partial(
                self._generate, batch, [rules[r] for r in b], [params[rows[r][0]] for r in b], eos
            )
            for b, batch in zip(batches, encoded, strict=True)
        ]
        generated = run_streams(jobs, self._streams(), self._threads())
        results: list[list[Completion]] = [[] for _ in conversations]
        for b, batch, tokens in zip(batches, encoded, generated, strict=True):
            prompt_lengths = batch["attention_mask"].sum(dim=1).tolist()
            for slot, (r, row_tokens) in enumerate(zip(b, tokens, strict=True)):
                request = params[rows[r][0]]
                results[rows[r][0]].append(
                    self._completion(row_tokens, int(prompt_lengths[slot]), request, eos)
                )
        # a request's samples come back in seed order: the sort is stable, so its rows stay in order
        # within ``order``, and every batch takes them in that order
        return results

    def _rule(self, params: SamplingParams, seed: int) -> Any:
        from ptfactory.engines.processors import RowRule

        grammar = self._grammars.grammar(params.json_schema) if params.json_schema is not None else None
        return RowRule(seed, params.temperature, params.top_p, grammar)

    def _eos(self) -> set[int]:
        model, tokenizer = self._model, self._tokenizer
        eos = {tokenizer.eos_token_id, tokenizer.pad_token_id, *_ids(model.generation_config.eos_token_id)}
        eos.discard(None)
        return eos

    def _encode(self, texts: Sequence[str]) -> dict[str, Any]:
        """Rendered prompts as one left-padded batch (the template already wrote the special tokens)."""
        encoded = self._tokenizer(list(texts), add_special_tokens=False, padding=True, return_tensors="pt")
        return {k: v.to(self.device) for k, v in encoded.items() if k in ("input_ids", "attention_mask")}

    def _generate(
        self, encoded: dict[str, Any], rules: list[Any], params: list[SamplingParams], eos: set[int]
    ) -> list[list[int]]:
        """One batch's generated tokens, a row per rule (run in a stream): transformers'
        ``generate``, greedy over what :class:`RowRules` leaves of each row's logits, each row
        ending at its own ``max_tokens`` and stop strings (:class:`RowLimits`)."""
        import torch
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

        from ptfactory.engines.processors import RowLimits, RowRules

        budget = max(p.max_tokens for p in params)
        if budget <= 0:
            return [[] for _ in rules]
        width = int(encoded["input_ids"].shape[1])
        pad = self._tokenizer.pad_token_id
        config = GenerationConfig(  # type: ignore[no-untyped-call]
            max_new_tokens=budget,
            do_sample=False,
            num_beams=1,
            pad_token_id=pad,
            eos_token_id=sorted(eos),
        )
        processor = RowRules(rules, width, eos, self._grammars, self.device)
        limits = RowLimits(
            width, [p.max_tokens for p in params], [_stops(p) for p in params], self._tokenizer
        )
        with torch.inference_mode():
            output = self._model.generate(
                **encoded,
                generation_config=config,
                logits_processor=LogitsProcessorList([processor]),
                stopping_criteria=StoppingCriteriaList([limits]),
            )
        return [row[width:].tolist() for row in output]

    def _completion(
        self, tokens: list[int], prompt_tokens: int, params: SamplingParams, eos: set[int]
    ) -> Completion:
        tokens = tokens[: params.max_tokens]
        length = next((i for i, t in enumerate(tokens) if t in eos), len(tokens))
        text = self._tokenizer.decode(tokens[:length], skip_special_tokens=True)
        finish = "stop" if length < len(tokens) or length < params.max_tokens else "length"
        for stop in _stops(params):
            if stop in text:
                text, finish = text.split(stop, 1)[0], "stop"
        return Completion(text, prompt_tokens, length, finish)

    # -- scoring ---------------------------------------------------------------------------------

    def _choice_logprobs(self, prompts: Sequence[Prompt], choices: Sequence[str]) -> list[list[float]]:
        """One forward pass per batch of prompts when every choice is one distinct token after the
        prompt (digits are, in the bundled tokenizers); otherwise one scored continuation each."""
        import torch

        model, tokenizer = self._load()
        contexts = [score_token_ids(tokenizer, p, choices[0])[0] for p in prompts]
        ids = [score_token_ids(tokenizer, prompts[0], c)[1] for c in choices] if prompts else []
        if not prompts or any(len(i) != 1 for i in ids) or len({i[0] for i in ids}) != len(ids):
            return super()._choice_logprobs(prompts, choices)
        wanted = torch.tensor([i[0] for i in ids], device=self.device)
        order = sorted(range(len(prompts)), key=lambda i: len(contexts[i]))  # less padding per batch
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

        def picked(batch: list[int]) -> list[list[float]]:
            input_ids, mask, positions, _ = left_padded([(contexts[i], []) for i in batch], pad)
            with torch.inference_mode():
                logits = model(
                    input_ids=input_ids.to(self.device),
                    attention_mask=mask.to(self.device),
                    position_ids=positions.to(self.device),
                    logits_to_keep=1,  # the last position's alone: the vocabulary head is most of a small model
                ).logits[:, -1]
            return torch.log_softmax(logits.float(), dim=-1)[:, wanted].tolist()

        batches = balanced_batches(order, self.score_batch_size, self._streams())
        jobs = [functools.partial(picked, batch) for batch in batches]
        results: dict[int, list[float]] = {}
        for batch, values in zip(batches, run_streams(jobs, self._streams(), self._threads()), strict=True):
            for i, row in zip(batch, values, strict=True):
                results[i] = [float(x) for x in row]
        return [results[i] for i in range(len(prompts))]

    def _score(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[TokenLogprobs]:
        import torch

        model, tokenizer = self._load()
        pairs = [score_token_ids(tokenizer, p, c) for p, c in zip(prompts, continuations, strict=True)]
        results: dict[int, TokenLogprobs] = {
            i: TokenLogprobs([], []) for i, (_, cont) in enumerate(pairs) if not cont
        }
        order = sorted(
            (i for i in range(len(pairs)) if i not in results), key=lambda i: sum(map(len, pairs[i]))
        )
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        vocab = int(model.config.get_text_config().vocab_size)

        def picked(batch: list[int]) -> list[list[float]]:
            input_ids, mask, positions, keep = left_padded([pairs[i] for i in batch], pad)
            with torch.inference_mode():
                # every continuation ends its row: the last ``keep`` positions predict them all
                logits = model(
                    input_ids=input_ids.to(self.device),
                    attention_mask=mask.to(self.device),
                    position_ids=positions.to(self.device),
                    logits_to_keep=keep,
                ).logits.float()
                out = []
                for row, i in enumerate(batch):
                    cont = pairs[i][1]
                    span = logits[row, keep - len(cont) - 1 : keep - 1]
                    target = torch.tensor(cont, device=span.device)[:, None]
                    out.append((span.gather(1, target)[:, 0] - torch.logsumexp(span, dim=-1)).tolist())
            return out

        streams = self._streams()
        batches = _logit_batches(order, [len(p[1]) for p in pairs], self.score_batch_size, vocab, streams)
        jobs = [functools.partial(picked, batch) for batch in batches]
        for batch, values in zip(batches, run_streams(jobs, streams, self._threads()), strict=True):
            for i, row in zip(batch, values, strict=True):
                cont_ids = pairs[i][1]
                results[i] = TokenLogprobs([tokenizer.decode([t]) for t in cont_ids], [float(x) for x in row])
        return [results[i] for i in range(len(pairs))]

    def count_tokens(self, prompts: Sequence[Prompt]) -> list[int]:
        """Exactly the context tokens scoring feeds the model for each prompt."""
        _, tokenizer = self._load()
        return [len(score_token_ids(tokenizer, p, "")[0]) for p in prompts]

    def close(self) -> None:
        self._model = self._tokenizer = self._grammars = None


def _logit_batches(
    order: list[int], conts: list[int], size: int, vocab: int, streams: int
) -> list[list[int]]:
    """``order`` (rows sorted by length) cut as :func:`balanced_batches` cuts it, then further where
    a batch's kept logits (rows x its longest continuation + 1, x the vocabulary) would pass the
    budget the streams share; a row alone may pass it."""
    budget = LOGIT_FLOATS // max(streams, 1)
    batches: list[list[int]] = []
    for batch in balanced_batches(order, size, streams):
        current: list[int] = []
        for i in batch:
            widest = max([conts[j] for j in current] + [conts[i]]) + 1
            if current and (len(current) + 1) * widest * vocab > budget:
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
    return batches
