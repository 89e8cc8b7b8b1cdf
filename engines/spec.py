"""How an engine is declared in factory.yaml, and how a declaration becomes an :class:`Engine`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ptfactory.engines.base import Engine
from ptfactory.engines.bundled import bundled_name
from ptfactory.engines.cache import ResponseCache

__all__ = ["EngineSpec", "build_engine", "resolved_backend"]


class EngineSpec(BaseModel):
    """One engine: a backend, a model, and the backend's knobs (unused ones are ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["auto", "ctranslate2", "transformers", "vllm", "openai"] = Field(
        "auto",
        description="auto: ctranslate2 where it runs the model (the bundled SmolLM2, local Llama-family "
        "folders), else transformers; transformers also where it reads a bfloat16 model's weights "
        "packed (float32 on an AVX-512 CPU: faster there)",
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
        description="auto: float32 on CPU, bfloat16 on GPU (transformers); ctranslate2 also takes "
        "int8 and int8_float32 (faster, but greedy outputs drift from float32)",
    )
    threads: int | None = Field(None, gt=0)
    streams: int | None = Field(
        None,
        gt=0,
        description="transformers: batches run side by side on the CPU, each on threads/streams "
        "cores; default 2 on a CPU with 2+ threads (a few-row decoding step leaves a second core "
        "idle), 1 on a GPU",
    )
    packed_weights: bool | None = Field(
        None,
        description="transformers, float32 on a CPU: layers whose weights are bfloat16 values read a "
        "packed bfloat16 copy at a few rows (half the bytes a decoding step streams; the same values). "
        "Default: on where the CPU has AVX-512",
    )
    score_dtype: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="transformers, float32 on a CPU: scoring's matrix products (IFD, likelihood "
        "and probability judges) in bfloat16 on exact copies of the layers whose weights are "
        "bfloat16 values: 2x the IFD rows/s on an AMX CPU, the same ranking (Spearman 0.999), "
        "log-probabilities a few hundredths apart; generation stays float32. auto: bfloat16 where "
        "the CPU has bfloat16 units (AMX, AVX512-BF16)",
    )
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
    """The backend a spec runs on: ``auto`` is ctranslate2 where it runs the model on the CPU, unless
    transformers reads the model's weights packed (faster there)."""
    if spec.backend != "auto":
        return spec.backend
    from ptfactory.engines.ct2_models import stores_bfloat16, supports_ct2
    from ptfactory.engines.packed_linear import wants_packing

    if spec.device != "cpu" or not supports_ct2(spec.model):
        return "transformers"
    # where float32 layers read packed bfloat16 weights, transformers generates and scores faster
    # than ctranslate2 float32 (README, Benchmarks: 2.9x its greedy tokens/s at batch 8, 1.13x IFD)
    dtype = "float32" if spec.dtype == "auto" else spec.dtype
    packs = wants_packing(spec.device, dtype, spec.packed_weights) and stores_bfloat16(spec.model)
    return "transformers" if packs else "ctranslate2"


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
            packed_weights=spec.packed_weights,
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
            packed_weights=spec.packed_weights,
            score_dtype=spec.score_dtype,
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
