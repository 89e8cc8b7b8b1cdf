"""How an engine is declared in factory.yaml, and how a declaration becomes an :class:`Engine`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ptfactory.engines.base import Engine
from ptfactory.engines.bundled import bundled_name
from ptfactory.engines.cache import ResponseCache

__all__ = ["DEFAULT_BACKEND", "REMOVED_KEYS", "EngineSpec", "build_engine", "resolved_backend"]

# What ``backend: auto`` runs (docs/engines.md: chosen by bench/engines.py)
DEFAULT_BACKEND = "transformers"
# Settings of the former hand-written CPU runtime, and what took their place
REMOVED_KEYS = {
    "packed_weights": "the embedded engine reads the model's own weights in float32 on every CPU "
    "(dtype sets the compute type)",
    "score_dtype": "scoring runs in the engine's dtype (dtype sets the compute type, float32 by default)",
}


class EngineSpec(BaseModel):
    """One engine: a backend, a model, and the backend's knobs (unused ones are ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["auto", "ctranslate2", "transformers", "vllm", "openai"] = Field(
        "auto",
        description="auto: the embedded default, transformers (float32 on every CPU; docs/engines.md "
        "says why); ctranslate2 runs greedy chat and scoring of Llama-family models on CTranslate2 "
        "(sampled and JSON-constrained requests on transformers); vllm and openai for GPUs and servers",
    )
    model: str = Field(
        "bundled",
        description="'bundled' (SmolLM2-135M-Instruct), 'bundled:gemma3-270m' (Gemma 3 270M), a folder, or a hub id",
    )
    # ctranslate2 and transformers
    batch_size: int = Field(
        32,
        gt=0,
        description="replies generated together (on transformers a request of n samples is n "
        "rows); outputs do not depend on it (per-request seeds). "
        "On 2 CPU cores the demo's sampled answers came 1.75x faster at 32 than at 8",
    )
    score_batch_size: int = Field(
        8,
        gt=0,
        description="prompts scored together (IFD, likelihood and pairwise judges): a prefill is "
        "wide at a few rows, and more rows only add padding (SmolLM2 scored the demo's pairs 1.3x "
        "slower at 32 than at 8)",
    )
    device: str = "cpu"
    dtype: str = Field(
        "auto",
        description="the compute type, part of every cache key: auto is float32 on a CPU (the same "
        "on every instruction set), bfloat16 on a GPU (transformers); ctranslate2 also takes int8 "
        "and int8_float32 (faster, but scores drift from float32 and between CPUs)",
    )
    threads: int | None = Field(None, gt=0)
    streams: int | None = Field(
        None,
        gt=0,
        description="transformers: batches run side by side on the CPU, each on threads/streams "
        "cores; default 2 on a CPU with 2+ threads (a few-row decoding step leaves a second core "
        "idle), 1 on a GPU",
    )

    @model_validator(mode="before")
    @classmethod
    def _removed_keys(cls, data: Any) -> Any:
        """Keys of the hand-written CPU runtime (issue 40) fail with what replaced them, rather than
        as unknown keys."""
        if isinstance(data, dict):
            for key, instead in REMOVED_KEYS.items():
                if key in data:
                    raise ValueError(f"'{key}' was removed: {instead}; delete it")
        return data

    # vllm
    tensor_parallel_size: int = Field(1, gt=0)
    enforce_eager: bool = False
    max_model_len: int | None = Field(None, gt=0)
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1)
    python: str | None = Field(None, description="run vLLM in this interpreter (its own venv) as a worker")
    # openai
    base_url: str = "http://127.0.0.1:8000/v1"
    served_model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    max_concurrency: int = Field(8, gt=0)
    timeout_s: float = Field(120.0, gt=0)
    max_retries: int = Field(5, ge=0)
    # all
    chunk_size: int | None = Field(None, gt=0, description="requests per cached backend call")
    price_per_mtok: float = Field(0.0, ge=0, description="estimated cost in $ per million tokens")

    @property
    def model_id(self) -> str:
        """The model's name in cache keys and provenance."""
        return bundled_name(self.model) or self.model


def resolved_backend(spec: EngineSpec) -> str:
    """The backend a spec runs on: ``auto`` is :data:`DEFAULT_BACKEND`, on every CPU and model
    (chosen by bench/engines.py, docs/engines.md)."""
    return DEFAULT_BACKEND if spec.backend == "auto" else spec.backend


def build_engine(spec: EngineSpec, cache_path: Path | None) -> Engine:
    cache = ResponseCache(cache_path) if cache_path else None
    backend = resolved_backend(spec)
    if backend == "ctranslate2":
        from ptfactory.engines.ct2_engine import CTranslate2Engine

        return CTranslate2Engine(
            model_id=spec.model_id,
            cache=cache,
            chunk_size=spec.chunk_size or CTranslate2Engine.chunk_size,
            model_path=spec.model,
            batch_size=spec.batch_size,
            score_batch_size=spec.score_batch_size,
            dtype=spec.dtype,
            threads=spec.threads,
            streams=spec.streams,
        )
    if backend == "transformers":
        from ptfactory.engines.transformers_engine import TransformersEngine

        return TransformersEngine(
            model_id=spec.model_id,
            cache=cache,
            chunk_size=spec.chunk_size or TransformersEngine.chunk_size,
            model_path=spec.model,
            batch_size=spec.batch_size,
            score_batch_size=spec.score_batch_size,
            device=spec.device,
            dtype=spec.dtype,
            threads=spec.threads,
            streams=spec.streams,
        )
    if backend == "vllm":
        from ptfactory.engines.vllm_engine import VLLMEngine

        return VLLMEngine(
            model_id=spec.model_id,
            cache=cache,
            chunk_size=spec.chunk_size or VLLMEngine.chunk_size,
            model_path=spec.model,
            dtype=spec.dtype,
            tensor_parallel_size=spec.tensor_parallel_size,
            enforce_eager=spec.enforce_eager,
            max_model_len=spec.max_model_len,
            gpu_memory_utilization=spec.gpu_memory_utilization,
            python=spec.python,
        )
    from ptfactory.engines.openai_engine import OpenAIEngine

    return OpenAIEngine(
        model_id=spec.model_id,
        cache=cache,
        chunk_size=spec.chunk_size or OpenAIEngine.chunk_size,
        base_url=spec.base_url,
        served_model=spec.served_model,
        api_key_env=spec.api_key_env,
        max_concurrency=spec.max_concurrency,
        timeout_s=spec.timeout_s,
        max_retries=spec.max_retries,
    )
