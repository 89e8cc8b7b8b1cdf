"""Any OpenAI-compatible server (``vllm serve``, SGLang, llama.cpp's server, a hosted API).

Every text of a request goes through ``redact`` (personal data and secrets replaced by typed
placeholders, ``filters/privacy``) before it is sent or keyed in the cache. Async with bounded
concurrency; 429, 5xx, timeouts and dropped connections are retried
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
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
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


# keys of a message that name things (never free text): left as they are by the redaction
_NAMES = frozenset({"role", "name", "tool_call_id", "id", "type"})


def privacy_redactor(config: Any = None) -> Callable[[str], str]:
    """``text -> text`` with personal data and secrets replaced by typed placeholders
    (``filters/privacy``; ``config``: its ``PrivacyConfig``, default the defaults). Presidio and
    detect-secrets load on the first text that needs them, not here."""

    def redact(text: str) -> str:
        from ptfactory.filters.privacy import redact_text

        return redact_text(text, config)[0]

    return redact


def _redacted(value: Any, redact: Callable[[str], str], key: str | None = None) -> Any:
    if isinstance(value, str):
        return value if key in _NAMES else redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v, redact, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v, redact, key) for v in value]
    return value


@dataclass
class OpenAIEngine(Engine):
    base_url: str = "http://127.0.0.1:8000/v1"
    served_model: str = ""  # the name the server knows the model by; default: model_id
    api_key_env: str = "OPENAI_API_KEY"
    max_concurrency: int = 8
    timeout_s: float = 120.0
    max_retries: int = 5
    backoff_s: float = 0.5

    # applied to every text of a request (messages, tool-call arguments, prompts and continuations
    # to score) before it leaves the machine and before its cache key is made: no remote request,
    # and no key, is made of a raw value. None sends the text as given (privacy.enabled: false).
    redact: Callable[[str], str] | None = field(default_factory=privacy_redactor, repr=False, compare=False)

    backend = "openai"
    supports_json_schema = True
    _start_ids: list[int] | None = field(default=None, init=False, repr=False)
    native_tool_calls = True  # OpenAI's tool_calls in the reply (vLLM serve parses them with a parser)

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.api_key_env, "")
        return {"Authorization": f"Bearer {key}"} if key else {}

    def engine_version(self) -> str:
        return "r1"  # 1: scoring renders prompts with the served model's chat template

    def library(self) -> str:
        return "openai-compatible server"

    def device_name(self) -> str:
        return "remote"

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

    # -- what leaves the machine ----------------------------------------------------------------

    def chat_many(self, requests: Sequence[tuple[Conversation, SamplingParams]]) -> list[list[Completion]]:
        if self.redact is not None:
            requests = [(_redacted(c, self.redact), p) for c, p in requests]
        return super().chat_many(requests)

    def score(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[TokenLogprobs]:
        if self.redact is not None:
            prompts = [_redacted(p, self.redact) for p in prompts]
            continuations = [self.redact(c) for c in continuations]
        return super().score(prompts, continuations)

    def choice_logprobs(self, prompts: Sequence[Prompt], choices: Sequence[str]) -> list[list[float]]:
        if self.redact is not None:
            prompts = [_redacted(p, self.redact) for p in prompts]
        return super().choice_logprobs(prompts, choices)

    # -- scoring -------------------------------------------------------------------------------

    async def _tokenize(
        self, client: httpx.AsyncClient, gate: asyncio.Semaphore, body: dict[str, Any]
    ) -> list[int]:
        """Token ids from the server's ``/tokenize`` (vLLM's, beside ``/v1``): ``messages`` through the
        served model's chat template, or a ``prompt`` as text."""
        async with gate:
            data = await self._post(client, "/../tokenize", {"model": self._model_name, **body})
        if "tokens" not in data:
            raise EngineError(f"{self.base_url} has no /tokenize; scoring needs a vLLM server")
        return [int(t) for t in data["tokens"]]

    async def _context(self, client: httpx.AsyncClient, gate: asyncio.Semaphore, prompt: Prompt) -> list[int]:
        """What the model reads before the continuation, as every local backend renders it
        (engines/scoring.py): a conversation through the chat template with the assistant turn
        opened, a string as text with the tokenizer's special tokens, nothing as the start token."""
        if isinstance(prompt, str):
            context = (
                await self._tokenize(client, gate, {"prompt": prompt, "add_special_tokens": True})
                if prompt
                else []
            )
        elif prompt:
            body = {"messages": list(prompt), "add_generation_prompt": True, "add_special_tokens": False}
            context = await self._tokenize(client, gate, body)
        else:
            context = []
        return context or await self._start(client, gate)

    async def _start(self, client: httpx.AsyncClient, gate: asyncio.Semaphore) -> list[int]:
        """The token a continuation without a prompt is scored after: the tokenizer's BOS (or EOS),
        as engines/scoring.py reads it, from the served model's tokenizer where the server's
        ``/v1/models`` names a folder on this machine (a server that adds a BOS by itself says so)."""
        if self._start_ids is None:
            added = await self._tokenize(client, gate, {"prompt": "", "add_special_tokens": True})
            if added:
                self._start_ids = added
            else:
                async with gate:
                    response = await client.get(
                        f"{self.base_url.rstrip('/')}/models", headers=self._headers()
                    )
                roots = [
                    m.get("root") for m in response.json().get("data", []) if m.get("id") == self._model_name
                ]
                folder = next((r for r in roots if r and Path(r).is_dir()), None)
                if folder is None:
                    raise EngineError(
                        f"{self.base_url} adds no start token and its model's tokenizer is not on this "
                        "machine, so a continuation without a prompt cannot be scored; give it a prompt"
                    )
                from transformers import AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
                start = (
                    tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
                )
                self._start_ids = [int(start)]
        return list(self._start_ids)

    async def _one_score(
        self, client: httpx.AsyncClient, gate: asyncio.Semaphore, prompt: Prompt, continuation: str
    ) -> TokenLogprobs:
        context = await self._context(client, gate, prompt)
        cont = await self._tokenize(client, gate, {"prompt": continuation, "add_special_tokens": False})
        if not cont:
            return TokenLogprobs([], [])
        ids = context + cont
        body = {
            "model": self._model_name,
            "prompt": ids,  # token ids: the server scores exactly these, no second tokenization
            "max_tokens": 1,
            "temperature": 0,
            "prompt_logprobs": 0,  # vLLM extension: logprobs of every prompt token
        }
        async with gate:
            data = await self._post(client, "/completions", body)
        entries = data["choices"][0].get("prompt_logprobs") or data.get("prompt_logprobs")
        if not entries or len(entries) != len(ids):
            raise EngineError(f"{self.base_url} does not return prompt_logprobs; use a vLLM server to score")
        tokens: list[str] = []
        logprobs: list[float] = []
        for position in range(len(context), len(ids)):
            info = (entries[position] or {}).get(str(ids[position]))
            if not isinstance(info, dict):  # the boundary check: the server scored the tokens sent
                raise EngineError(
                    f"{self.base_url} scored other tokens than sent at position {position} "
                    f"(sent {ids[position]}); is it serving {self._model_name}?"
                )
            tokens.append(str(info.get("decoded_token", ids[position])))
            logprobs.append(float(info["logprob"]))
        return TokenLogprobs(tokens, logprobs)

    async def _score_all(
        self, prompts: Sequence[Prompt], continuations: Sequence[str]
    ) -> list[TokenLogprobs]:
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
        """Each continuation's log-probabilities after its prompt rendered as the local backends
        render it (the served model's chat template, through the server's ``/tokenize``), read
        from vLLM's ``prompt_logprobs`` over exactly the token ids sent."""
        return _run_sync(self._score_all(prompts, continuations))
