"""The embedded default engine: Hugging Face transformers on CPU (or one GPU), batched.

No structured-output support (``supports_json_schema`` is false): judges on this backend read
their score from the model's probabilities over the score tokens (``choice_logprobs``: one
batched prefill, no decoding). A model without a chat template (a base model) can score
string prompts but not chat.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptfactory.engines.base import (
    Completion,
    Conversation,
    Engine,
    Prompt,
    SamplingParams,
    TokenLogprobs,
)
from ptfactory.engines.bundled import resolve_model_path
from ptfactory.engines.scoring import score_token_ids
from ptfactory.errors import EngineError

__all__ = ["TransformersEngine"]


@dataclass
class TransformersEngine(Engine):
    model_path: str = "bundled"
    batch_size: int = 8
    device: str = "cpu"
    dtype: str = "auto"  # float32 on CPU (faster than bf16 on AVX2), bfloat16 on GPU
    threads: int | None = None

    backend = "transformers"
    _model: Any = field(default=None, init=False, repr=False)
    _tokenizer: Any = field(default=None, init=False, repr=False)

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
                dtype = (
                    self.dtype
                    if self.dtype != "auto"
                    else ("float32" if self.device == "cpu" else "bfloat16")
                )
                model: Any = AutoModelForCausalLM.from_pretrained(
                    path, dtype=getattr(torch, dtype), local_files_only=local
                )
            except OSError as exc:
                raise EngineError(f"cannot load model {path!r}: {exc}") from exc
            tokenizer.padding_side = "left"
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            self._model = model.to(self.device).eval()
            self._tokenizer = tokenizer
        return self._model, self._tokenizer

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        results: list[list[Completion]] = []
        for start in range(0, len(conversations), self.batch_size):
            results.extend(self._generate(conversations[start : start + self.batch_size], params))
        return results

    def _generate(self, batch: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        import torch

        model, tokenizer = self._load()
        if tokenizer.chat_template is None:
            raise EngineError(
                f"model {self.model_path!r} has no chat template, so it cannot chat; use an "
                "instruct/chat model, or (judges) prompt: completion with scoring: probability"
            )
        encoded = tokenizer.apply_chat_template(
            list(batch), add_generation_prompt=True, return_tensors="pt", padding=True, return_dict=True
        ).to(self.device)
        if params.seed is not None:
            torch.manual_seed(params.seed)
        sample = params.temperature > 0
        kwargs: dict[str, Any] = {
            "max_new_tokens": params.max_tokens,
            "do_sample": sample,
            "num_return_sequences": params.n,
            "pad_token_id": tokenizer.pad_token_id,
        }
        if sample:
            kwargs.update(temperature=params.temperature, top_p=params.top_p)
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        if params.stop:
            kwargs.update(stop_strings=list(params.stop), tokenizer=tokenizer)
        with torch.inference_mode():
            output = model.generate(**encoded, **kwargs)
        width = encoded["input_ids"].shape[1]
        prompt_lengths = encoded["attention_mask"].sum(dim=1).tolist()
        eos = {tokenizer.eos_token_id, tokenizer.pad_token_id}
        completions: list[list[Completion]] = []
        for index in range(len(batch)):
            group = []
            for sequence in output[index * params.n : (index + 1) * params.n]:
                generated = sequence[width:].tolist()
                length = next((i for i, t in enumerate(generated) if t in eos), len(generated))
                text = tokenizer.decode(generated[:length], skip_special_tokens=True)
                finish = "stop" if length < len(generated) or length < params.max_tokens else "length"
                for stop in params.stop:
                    if stop in text:
                        text, finish = text.split(stop, 1)[0], "stop"
                group.append(Completion(text, int(prompt_lengths[index]), length, finish))
            completions.append(group)
        return completions

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
        results: dict[int, list[float]] = {}
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            width = max(len(contexts[i]) for i in batch)
            input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):  # left padding: the last position is every prompt's end
                input_ids[row, width - len(contexts[i]) :] = torch.tensor(contexts[i])
                mask[row, width - len(contexts[i]) :] = 1
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.inference_mode():
                logits = model(
                    input_ids=input_ids.to(self.device),
                    attention_mask=mask.to(self.device),
                    position_ids=positions.to(self.device),
                ).logits[:, -1]
            picked = torch.log_softmax(logits.float(), dim=-1)[:, wanted]
            for row, i in enumerate(batch):
                results[i] = [float(x) for x in picked[row].tolist()]
        return [results[i] for i in range(len(prompts))]

    def _score(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[TokenLogprobs]:
        import torch

        model, tokenizer = self._load()
        results = []
        for prompt, continuation in zip(prompts, continuations, strict=True):
            context, cont_ids = score_token_ids(tokenizer, prompt, continuation)
            if not cont_ids:
                results.append(TokenLogprobs([], []))
                continue
            ids = torch.tensor([context + cont_ids], device=self.device)
            with torch.inference_mode():
                logits = model(ids).logits[0, len(context) - 1 : -1]
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            picked = logprobs.gather(1, torch.tensor(cont_ids, device=self.device)[:, None])[:, 0]
            results.append(
                TokenLogprobs([tokenizer.decode([t]) for t in cont_ids], [float(x) for x in picked.tolist()])
            )
        return results

    def close(self) -> None:
        self._model = None
        self._tokenizer = None
