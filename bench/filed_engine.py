"""The embedded engine as issue 15 measured it ("today's" in its goal), as a bench runner.

Its code at 6e24bcb (engines/transformers_engine.py, unchanged from f1332f3 to there): float32
transformers, replies from ``generate`` a batch at a time (left-padded, every row run until the
batch's longest ends), and ``score`` one row per forward pass, with the vocabulary head and a
log-softmax over every position of the row. Only the parts the bench calls are kept: greedy
chat and ``score``; the model and tokenizer load as the engine loaded them.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["FiledEngineRunner"]


class FiledEngineRunner:
    """``transformers-6e24bcb``: generation and IFD through the engine as the issue measured it."""

    batched = True
    scores = True

    def __init__(self, name: str, threads: int) -> None:
        self.name, self.threads = name, threads
        self.model: Any = None
        self.tokenizer: Any = None

    def load(self) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from ptfactory.engines.bundled import bundled_model_dir

        torch.set_num_threads(self.threads)
        path = str(bundled_model_dir())
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True)
        self.model = model.eval()

    def generate(self, prompts: list[Any], max_tokens: int, batch: int) -> tuple[list[str], int]:
        import torch

        texts, tokens = [], 0
        eos = {self.tokenizer.eos_token_id, self.tokenizer.pad_token_id}
        for start in range(0, len(prompts), batch):
            encoded = self.tokenizer.apply_chat_template(
                prompts[start : start + batch],
                add_generation_prompt=True,
                return_tensors="pt",
                padding=True,
                return_dict=True,
            )
            with torch.inference_mode():
                output = self.model.generate(
                    **encoded,
                    max_new_tokens=max_tokens,
                    do_sample=False,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
            width = encoded["input_ids"].shape[1]
            for sequence in output:
                generated = sequence[width:].tolist()
                length = next((i for i, t in enumerate(generated) if t in eos), len(generated))
                texts.append(self.tokenizer.decode(generated[:length], skip_special_tokens=True))
                tokens += length
        return texts, tokens

    def _mean_nll(self, prompt: Any, continuation: str) -> float:
        import torch

        from ptfactory.engines.scoring import score_token_ids

        context, cont_ids = score_token_ids(self.tokenizer, prompt, continuation)
        ids = torch.tensor([context + cont_ids])
        with torch.inference_mode():
            logits = self.model(ids).logits[0, len(context) - 1 : -1]
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        picked = logprobs.gather(1, torch.tensor(cont_ids)[:, None])[:, 0]
        return -float(picked.mean())

    def ifd(self, rows: list[tuple[str, str]]) -> list[float]:
        return [
            math.exp(self._mean_nll([{"role": "user", "content": q}], a) - self._mean_nll([], a))
            for q, a in rows
        ]

    def close(self) -> None:
        self.model = self.tokenizer = None
