"""The embedded default engine: Hugging Face transformers on CPU (or one GPU), batched.

- Generation: each fixed request chunk becomes one row per sample, cut into near-equal batches of
  rows of similar prompt length (less padding), decoded by a loop whose rows leave the batch as
  they end (:mod:`~ptfactory.engines.decoding`); sampling draws from per-row generators seeded
  from (seed, request), so a request's text does not depend on its batch
  (:mod:`~ptfactory.engines.sampling`). Requests of different settings (``chat_many``: budgets,
  temperatures, schemas, tools) share batches: each row picks and ends by its own
  (:mod:`~ptfactory.engines.row_picker`); rows of different budgets are dealt out over the
  batches.
- On a CPU, float32 layers whose weights are bfloat16 values read a packed bfloat16 copy at a few
  rows (:mod:`~ptfactory.engines.packed_linear`: half the bytes a decoding step streams), and
  batches run one at a time on every thread. Without packing, batches run two side by side, each
  on half the threads (:mod:`~ptfactory.engines.streams`): a few-row step leaves a core idle.
- Constrained JSON (``supports_json_schema``): ``params.json_schema`` masks every token the
  schema does not allow (llguidance, a matcher per row), so a reply that finishes
  (``finish_reason`` ``stop``) parses and validates; one cut by ``max_tokens`` says ``length``.
  Stop strings are not applied to constrained replies (the grammar decides where the JSON ends).
- Scoring: batches of (prompt, continuation) padded on the right (causal attention: the padding
  after a row changes none of its logits), sorted by length; the vocabulary head runs on the
  continuation's positions only, and on the last position alone for ``choice_logprobs``. On a CPU
  with bfloat16 units, scoring's wide products run in bfloat16 on exact copies of bfloat16-valued
  weights (:mod:`~ptfactory.engines.bf16_scoring`; ``score_dtype``); generation never does.

A model without a chat template (a base model) can score string prompts but not chat.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from ptfactory.engines.bf16_scoring import bfloat16_products, keep_bfloat16_copies, wants_bf16_scoring
from ptfactory.engines.bundled import resolve_model_path
from ptfactory.engines.kept_logits import (
    LOGIT_FLOATS,
    chunk_head,
    kept_logprobs,
    score_batches,
    sliced_head_fits,
    vocab_width,
)
from ptfactory.engines.packed_linear import pack_linears, wants_packing
from ptfactory.engines.scoring import right_padded, score_token_ids
from ptfactory.engines.streams import auto_streams, balanced_batches, dealt_batches, run_streams
from ptfactory.engines.weights import local_folder
from ptfactory.errors import EngineError

if TYPE_CHECKING:
    from ptfactory.engines.row_picker import RowRule

__all__ = ["TransformersEngine"]


# Bumped when this engine's outputs change for the same request (e.g. how sampling is seeded),
# so the cache does not serve the old behaviour's answers.
REVISION = "6"  # 6: the Llama step in C, scoring's shared openings: sums in another order


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
    dtype: str = "auto"  # float32 on CPU (faster than bf16 on AVX2), bfloat16 on GPU
    threads: int | None = None
    streams: int | None = None  # batches run side by side on the CPU (None: engines/streams.py)
    packed_weights: bool | None = None  # None: on for float32 on an AVX-512 CPU (packed_linear.py)
    score_dtype: str = "auto"  # auto: bfloat16 products on a CPU with bfloat16 units (bf16_scoring.py)

    backend = "transformers"
    supports_json_schema = True
    _model: Any = field(default=None, init=False, repr=False)
    _tokenizer: Any = field(default=None, init=False, repr=False)
    _grammars: Any = field(default=None, init=False, repr=False)
    _packed: int = field(default=0, init=False, repr=False)  # layers reading packed weights
    _bf16_scoring: bool = field(default=False, init=False, repr=False)
    _step: Any = field(default=None, init=False, repr=False)  # engines/llama_step.py, where exact

    def _dtype(self) -> str:
        auto = "float32" if self.device == "cpu" else "bfloat16"
        return auto if self.dtype == "auto" else self.dtype

    def quantization(self) -> str:
        return self._dtype()

    def weights_folder(self) -> Path | None:
        return local_folder(self.model_path)

    def _packs(self) -> bool:
        return wants_packing(self.device, self._dtype(), self.packed_weights)

    def _bf16_scores(self) -> bool:
        return wants_bf16_scoring(self.device, self._dtype(), self.score_dtype)

    def engine_version(self) -> str:
        versions = (importlib.metadata.version(p) for p in ("transformers", "torch"))
        packed = " packed=bf16" if self._packs() else ""  # the same values, summed in another order
        scores = " score=bf16" if self._bf16_scores() else ""  # scores a little apart
        return f"r{REVISION} transformers={next(versions)} torch={next(versions)}{packed}{scores}"

    def _load(self) -> tuple[Any, Any]:
        if self._model is None:
            import torch
            import transformers
            from transformers import AutoModelForCausalLM, AutoTokenizer

            from ptfactory.engines.llama_step import llama_step  # imports torch: not at start-up

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
            if self.device == "cpu":
                chunk_head(self._model)  # the same logits, faster (engines/kept_logits.py)
            # before packing: a packed layer hands wide inputs to the forward it had
            self._bf16_scoring = self._bf16_scores() and keep_bfloat16_copies(self._model) > 0
            self._packed = pack_linears(self._model) if self._packs() else 0
            self._step = llama_step(self._model) if self._packed else None
            self._tokenizer = tokenizer
        return self._model, self._tokenizer

    def _threads(self) -> int:
        import torch

        return self.threads or torch.get_num_threads()

    def _streams(self, decoding: bool = False) -> int:
        # a packed decoding step is bound by streaming its weights: two batches would read them twice
        alone = decoding and self._packed > 0
        return self.streams or (1 if alone else auto_streams(self.device, self._threads()))

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
        batches = cut(order, self.batch_size, self._streams(decoding=True))
        if self._grammars is None and any(p.json_schema is not None for p in params):
            from ptfactory.engines.constrained import GrammarCache

            self._grammars = GrammarCache(tokenizer, int(model.config.vocab_size))
        rules = [self._rule(params[i], seed) for i, seed in rows]  # grammars compiled here, once
        # tokenizing here, before the streams start: a fast tokenizer set to pad cannot be shared;
        # a batch holds each of its requests' prompts once (its samples' rows share the prefill)
        prompts = [list(dict.fromkeys(rows[r][0] for r in b)) for b in batches]
        encoded = [self._encode([texts[i] for i in requests]) for requests in prompts]
        expands = [
            [requests.index(rows[r][0]) for r in b] for b, requests in zip(batches, prompts, strict=True)
        ]
        eos = self._eos()
        jobs = [
            functools.partial(
                self._tokens,
                batch,
                expand if len(expand) > len(set(expand)) else None,
                [rules[r] for r in b],
                [params[rows[r][0]] for r in b],
                eos,
            )
            for b, batch, expand in zip(batches, encoded, expands, strict=True)
        ]
        generated = run_streams(jobs, self._streams(decoding=True), self._threads())
        results: list[list[Completion]] = [[] for _ in conversations]
        for b, batch, expand, tokens in zip(batches, encoded, expands, generated, strict=True):
            prompt_lengths = batch["attention_mask"].sum(dim=1).tolist()
            for r, slot, row_tokens in zip(b, expand, tokens, strict=True):
                request = params[rows[r][0]]
                results[rows[r][0]].append(
                    self._completion(row_tokens, int(prompt_lengths[slot]), request, eos)
                )
        # a request's samples come back in seed order: the sort is stable, so its rows stay in order
        # within ``order``, and every batch takes them in that order
        return results

    def _rule(self, params: SamplingParams, seed: int) -> RowRule:
        from ptfactory.engines.row_picker import RowRule

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

    def _tokens(
        self,
        encoded: dict[str, Any],
        expand: list[int] | None,
        rules: list[RowRule],
        params: list[SamplingParams],
        eos: set[int],
    ) -> list[list[int]]:
        """One batch's generated tokens, a row per rule (run in a stream): our decoding loop, whose
        ended rows leave the batch (:mod:`~ptfactory.engines.decoding`); each row ends at its own
        ``max_tokens`` and stop strings (a constrained row where its grammar ends). ``expand``:
        each row's prompt in ``encoded``, where rows share one."""
        import torch

        from ptfactory.engines.decoding import decode
        from ptfactory.engines.row_picker import RowPicker

        stops = [_stops(p) for p in params]
        # the last tokens that can hold a stop string's characters
        tails = [4 * max((len(stop) for stop in row), default=0) + 4 for row in stops]

        def stopped(row: int, tokens: list[int]) -> bool:
            if len(tokens) >= params[row].max_tokens:
                return True
            if not stops[row]:
                return False
            text = self._tokenizer.decode(tokens[-tails[row] :], skip_special_tokens=True)
            return any(stop in text for stop in stops[row])

        picker = RowPicker(rules, self._grammars, self.device)
        with torch.inference_mode():
            return decode(
                self._model,
                encoded["input_ids"],
                encoded["attention_mask"],
                max_new_tokens=max(p.max_tokens for p in params),
                pick=picker.pick,
                eos=eos,
                keep=picker.keep,
                stopped=stopped,
                expand=expand,
                step=self._step,
            )

    def _completion(
        self, tokens: list[int], prompt_tokens: int, params: SamplingParams, eos: set[int]
    ) -> Completion:
        length = next((i for i, t in enumerate(tokens) if t in eos), len(tokens))
        text = self._tokenizer.decode(tokens[:length], skip_special_tokens=True)
        finish = "stop" if length < len(tokens) or length < params.max_tokens else "length"
        for stop in _stops(params):
            if stop in text:
                text, finish = text.split(stop, 1)[0], "stop"
        return Completion(text, prompt_tokens, length, finish)

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
            width = max(len(contexts[i]) for i in batch)
            input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):  # left padding: the last position is every prompt's end
                input_ids[row, width - len(contexts[i]) :] = torch.tensor(contexts[i])
                mask[row, width - len(contexts[i]) :] = 1
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.inference_mode(), bfloat16_products(self._bf16_scoring):
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

        def picked(batch: list[int]) -> list[float]:
            tensors = [t.to(self.device) for t in right_padded([pairs[i] for i in batch], pad)]
            with torch.inference_mode(), bfloat16_products(self._bf16_scoring):
                return kept_logprobs(model, *tensors).tolist()  # type: ignore[no-any-return]

        sliced_head_fits(model)  # its probe once, here, before the streams' threads ask
        streams = self._streams()
        kept = [len(pairs[i][1]) for i in range(len(pairs))]
        # the logits budget is shared by the batches running at once
        batches = score_batches(
            order, kept, self.score_batch_size, vocab_width(model), LOGIT_FLOATS // streams
        )
        jobs = [functools.partial(picked, batch) for batch in batches]
        for batch, values in zip(batches, run_streams(jobs, streams, self._threads()), strict=True):
            offset = 0
            for i in batch:
                cont_ids = pairs[i][1]
                results[i] = TokenLogprobs(
                    [tokenizer.decode([t]) for t in cont_ids],
                    [float(x) for x in values[offset : offset + len(cont_ids)]],
                )
                offset += len(cont_ids)
        return [results[i] for i in range(len(pairs))]

    def count_tokens(self, prompts: Sequence[Prompt]) -> list[int]:
        """Exactly the context tokens scoring feeds the model for each prompt."""
        _, tokenizer = self._load()
        return [len(score_token_ids(tokenizer, p, "")[0]) for p in prompts]

    def close(self) -> None:
        self._model = self._step = self._tokenizer = None
