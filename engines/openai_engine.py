"""Any OpenAI-compatible server (``vllm serve``, SGLang, llama.cpp's server, a hosted API).

Async with bounded concurrency; 429, 5xx, timeouts and dropped connections are retried
with exponential backoff and jitter; a server that cannot be reached at all is one
:class:`EngineError` naming the URL and the fix. Each request is cached as it finishes
(``chunk_size`` requests per cached unit), so a crash loses at most one chunk in flight.
``chat`` and ``score`` are synchronous; called where an event loop is already running (a
Jupyter cell), they run their requests on a private loop in a worker thread and wait for it.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from ptfactory.engines.base import (
    Completion,
    Conversation,
    Engine,
    Prompt,
    SamplingParams,
    TokenLogprobs,
    failed_completion,
    tool_call_messages,
)
from ptfactory.errors import EngineError, EngineRequestError

__all__ = ["OpenAIEngine"]

_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
_T = TypeVar("_T")


def _run_sync(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(coroutine)``, also from inside a running event loop (where asyncio.run
    raises): there, on a fresh loop in a worker thread, blocking this thread until it is done."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ptf-openai") as pool:
        return pool.submit(asyncio.run, coroutine).result()


@dataclass
class OpenAIEngine(Engine):
    base_url: str = "http://127.0.0.1:8000/v1"
    served_model: str = ""  # the name the server knows the model by; default: model_id
    api_key_env: str = "OPENAI_API_KEY"
    max_concurrency: int = 8
    timeout_s: float = 120.0
    max_retries: int = 5
    backoff_s: float = 0.5

    backend = "openai"
    supports_json_schema = True
    native_tool_calls = True  # OpenAI's tool_calls in the reply (vLLM serve parses them with a parser)

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.api_key_env, "")
        return {"Authorization": f"Bearer {key}"} if key else {}

    @property
    def _model_name(self) -> str:
        return self.served_model or self.model_id

    async def _post(self, client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url.rstrip('/')}{path}"
        last: str = ""
        for attempt in range(self.max_retries + 1):
            try:
                response = await client.post(url, json=body, headers=self._headers())
            except httpx.ConnectError as exc:
                last = f"cannot connect ({exc})"
                if attempt == self.max_retries:
                    raise EngineError(
                        f"the OpenAI-compatible server at {self.base_url} is unreachable: {last}; "
                        "start it or fix the engine's base_url"
                    ) from exc
            except (httpx.TimeoutException, httpx.RemoteProtocolError, httpx.ReadError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code == 200:
                    return response.json()  # type: ignore[no-any-return]
                last = f"HTTP {response.status_code}: {response.text[:300]}"
                if response.status_code not in _RETRY_STATUS:
                    raise EngineError(f"{url} refused the request: {last}")
            if attempt < self.max_retries:
                await asyncio.sleep(self.backoff_s * (2**attempt) * (0.5 + random.random()))
        raise EngineRequestError(f"{url} failed after {self.max_retries + 1} attempts: {last}")

    def _body(
        self, conversation: Conversation, params: SamplingParams, n: int, seed: int | None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model_name,
            "messages": tool_call_messages(conversation, arguments="json") if params.tools else conversation,
            "n": n,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
        }
        if seed is not None:
            body["seed"] = seed
        if params.stop:
            body["stop"] = list(params.stop)
        if params.logprobs is not None:
            body["logprobs"] = True
            body["top_logprobs"] = params.logprobs
        if params.tools:  # the server renders them and parses the reply's calls (vLLM: --tool-call-parser)
            body["tools"] = params.tools
        if params.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": params.json_schema, "strict": True},
            }
        return body

    async def _one_chat(
        self,
        client: httpx.AsyncClient,
        gate: asyncio.Semaphore,
        conversation: Conversation,
        params: SamplingParams,
    ) -> list[Completion]:
        completions: list[Completion] = []
        while len(completions) < params.n:
            # Some servers (llama.cpp) quietly return fewer choices than n: ask again for the rest.
            seed = None if params.seed is None else params.seed + len(completions)
            async with gate:
                data = await self._post(
                    client,
                    "/chat/completions",
                    self._body(conversation, params, params.n - len(completions), seed),
                )
            usage = data.get("usage") or {}
            choices = data.get("choices") or []
            if not choices:
                raise EngineError(f"{self.base_url} answered with no choices: {str(data)[:200]}")
            for choice in choices:
                message = choice.get("message") or {}
                content = message.get("content") or ""
                calls = [
                    {"id": c.get("id"), "type": "function", "function": dict(c["function"])}
                    for c in message.get("tool_calls") or []
                    if isinstance(c, dict) and isinstance(c.get("function"), dict)
                ]
                logprobs = None
                if choice.get("logprobs") and choice["logprobs"].get("content"):
                    logprobs = [float(t["logprob"]) for t in choice["logprobs"]["content"]]
                completions.append(
                    Completion(
                        text=content,
                        prompt_tokens=int(usage.get("prompt_tokens", 0)),
                        completion_tokens=int(usage.get("completion_tokens", 0)) // max(len(choices), 1),
                        finish_reason=choice.get("finish_reason") or "stop",
                        logprobs=logprobs,
                        tool_calls=calls or None,
                    )
                )
        return completions[: params.n]

    async def _chat_all(
        self, conversations: Sequence[Conversation], params: SamplingParams
    ) -> list[list[Completion]]:
        gate = asyncio.Semaphore(self.max_concurrency)
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            results = await asyncio.gather(
                *(self._one_chat(client, gate, c, params) for c in conversations), return_exceptions=True
            )
        out: list[list[Completion]] = []
        for result in results:
            if isinstance(result, EngineRequestError):
                # this conversation failed after its retries; the others stand (and are cached)
                out.append([failed_completion(str(result))])
            elif isinstance(result, BaseException):
                raise result
            else:
                out.append(result)
        return out

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        return _run_sync(self._chat_all(conversations, params))

    async def _one_score(
        self, client: httpx.AsyncClient, gate: asyncio.Semaphore, prompt: str, continuation: str
    ) -> TokenLogprobs:
        body = {
            "model": self._model_name,
            "prompt": prompt + continuation,
            "max_tokens": 1,
            "temperature": 0,
            "prompt_logprobs": 0,  # vLLM extension: logprobs of every prompt token
        }
        async with gate:
            data = await self._post(client, "/completions", body)
        entries = data["choices"][0].get("prompt_logprobs") or data.get("prompt_logprobs")
        if not entries:
            raise EngineError(f"{self.base_url} does not return prompt_logprobs; use a vLLM server to score")
        # vLLM's /tokenize tells where the prompt ends (the first entry is None: no context yet).
        async with gate:
            counted = await self._post(client, "/../tokenize", {"model": self._model_name, "prompt": prompt})
        tokens: list[str] = []
        logprobs: list[float] = []
        for entry in entries[int(counted["count"]) :]:
            if not entry:
                continue
            token, info = _picked(entry)
            tokens.append(info.get("decoded_token", token) if isinstance(info, dict) else token)
            logprobs.append(float(info["logprob"] if isinstance(info, dict) else info))
        return TokenLogprobs(tokens, logprobs)

    async def _score_all(self, prompts: Sequence[str], continuations: Sequence[str]) -> list[TokenLogprobs]:
        gate = asyncio.Semaphore(self.max_concurrency)
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            return list(
                await asyncio.gather(
                    *(
                        self._one_score(client, gate, p, c)
                        for p, c in zip(prompts, continuations, strict=True)
                    )
                )
            )

    def _score(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[TokenLogprobs]:
        # The server applies no chat template to /completions: render the prompt turns as text
        # (a string prompt is already a completion prompt).
        texts = [
            p
            if isinstance(p, str)
            else "".join(f"{m['role']}: {m['content']}\n" for m in p) + ("assistant:\n" if p else "")
            for p in prompts
        ]
        return _run_sync(self._score_all(texts, continuations))


def _picked(entry: dict[str, Any]) -> tuple[str, Any]:
    """vLLM lists the actual prompt token with rank 1 among alternatives; prefer it."""
    for token, info in entry.items():
        if isinstance(info, dict) and info.get("rank") == 1:
            return token, info
    return next(iter(entry.items()))
