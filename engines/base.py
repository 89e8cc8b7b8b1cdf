"""The engine interface every LLM backend implements, and the caching around it.

``Engine.chat(conversations, params, tools=None) -> list[list[Completion]]`` (``params.n``
completions each; ``params.json_schema`` constrains the reply where ``supports_json_schema``;
``tools``, OpenAI-style function specs, go to the backend the way it takes them: the chat
template's ``tools``, vLLM's ``tools``, the OpenAI request's ``tools``; a reply's parsed calls come
back in ``Completion.tool_calls`` where the backend parses them, ``native_tool_calls``;
``Engine.chat_many`` takes requests of different settings in one call),
``Engine.score(prompts, continuations) -> list[TokenLogprobs]`` and
``Engine.choice_logprobs(prompts, choices) -> list[list[float]]``: the log-probability of each
of a fixed set of continuations (a judge's score tokens) after each prompt, prefill only, no
decoding. A prompt is a conversation (rendered by the chat template) or a plain string (a
completion prompt for base models without one). Subclasses implement ``_chat`` (or ``_chat_many``)/``_score``
(and may implement ``_choice_logprobs`` faster than one scored continuation per choice) for
the requests the cache cannot answer; the base class
looks every request up in the :class:`~ptfactory.engines.cache.ResponseCache` first and stores each
finished chunk immediately, so a run killed half-way re-sends nothing that finished.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ptfactory.engines.cache import ResponseCache, request_key
from ptfactory.engines.tool_calls import tool_call_messages
from ptfactory.engines.weights import folder_fingerprint

if TYPE_CHECKING:
    from ptfactory.engines.budget import Meter

__all__ = [
    "Completion",
    "Conversation",
    "Engine",
    "EngineStats",
    "Prompt",
    "SamplingParams",
    "TokenLogprobs",
    "request_seeds",
    "tool_call_messages",
]

# {role, content}; a turn may also carry ``tool_calls`` (assistant) or ``tool_call_id`` (tool)
Conversation = list[dict[str, Any]]
Prompt = Conversation | str  # a str is a completion prompt: no chat template is applied


@dataclass(frozen=True)
class SamplingParams:
    n: int = 1
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 256
    seed: int | None = 0
    stop: tuple[str, ...] = ()
    json_schema: dict[str, Any] | None = None  # structured output where the backend supports it
    logprobs: int | None = None  # top-k logprobs per generated token
    tools: list[dict[str, Any]] | None = None  # set by ``Engine.chat(..., tools=)``; backends read it

    def to_dict(self) -> dict[str, Any]:
        body = asdict(self)
        body["stop"] = list(self.stop)
        if self.tools is None:  # so every request without tools keeps its cache key and seeds
            del body["tools"]
        return body

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str = "stop"
    logprobs: list[float] | None = None
    # OpenAI form [{id, type, function: {name, arguments}}], where the backend parsed the reply's
    # calls itself (an OpenAI-compatible server with tool parsing); None: read them from ``text``
    tool_calls: list[dict[str, Any]] | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Completion:
        return cls(**data)

    @property
    def failed(self) -> bool:
        return self.finish_reason.startswith(FAILED)


FAILED = "error: "


def request_seeds(params: SamplingParams, conversation: Any) -> list[int]:
    """One seed per sample of a request, from (seed, request): the same request draws the same
    text whatever else shares its batch. The request is everything its cache key holds but the
    model (the params without n, so n=2 and n=4 share their first two samples)."""
    request = json.dumps(
        [params.seed, {**params.to_dict(), "n": None}, conversation],
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    digest = hashlib.sha256(request.encode("utf-8")).digest()
    base = int.from_bytes(digest[:8], "big") >> 1
    return [(base + i * 0x9E3779B97F4A7C15) % (1 << 63) for i in range(params.n)]


def failed_completion(message: str) -> Completion:
    """What a request that failed after its retries answers: no text, and why, in finish_reason."""
    return Completion(text="", prompt_tokens=0, completion_tokens=0, finish_reason=FAILED + message)


@dataclass
class TokenLogprobs:
    """Log-probabilities of each continuation token given the prompt."""

    tokens: list[str]
    logprobs: list[float]

    @property
    def mean_nll(self) -> float:
        return -sum(self.logprobs) / max(len(self.logprobs), 1)


@dataclass
class EngineStats:
    requests_sent: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    failed: int = 0  # requests that failed after their retries (recorded per sample, not cached)

    @property
    def hit_rate(self) -> float:
        total = self.requests_sent + self.cache_hits
        return self.cache_hits / total if total else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.seconds if self.seconds else 0.0


@dataclass
class Engine(ABC):
    """An LLM backend. ``model_id`` names the weights (it is part of every cache key)."""

    model_id: str
    cache: ResponseCache | None = None
    chunk_size: int = 64  # requests per backend call: the unit that is cached as it finishes
    stats: EngineStats = field(default_factory=EngineStats)
    # a stage's spending budget (engines/budget.py): asked before each chunk is sent, told its tokens
    budget: Meter | None = field(default=None, repr=False, compare=False)

    backend = "abstract"
    supports_json_schema = False
    native_tool_calls = False  # the backend returns parsed ``tool_calls`` (then no JSON constraint)

    def identity(self) -> dict[str, str]:
        """What decides this engine's numbers: the backend, its library and version, the model and
        its weights, the compute type and the device. The cache key holds exactly these facts, so
        one backend is never served another's answers, nor a model retrained in place its old
        weights' answers; manifests and judge calibration key on the same dict."""
        return {
            "backend": self.backend,
            "library": self.library(),
            "revision": self.engine_version(),
            "model": self.model_id,
            "weights": self.weights_fingerprint(),
            "compute_type": self.quantization(),
            "device": self.device_name(),
        }

    def cache_identity(self) -> str:
        """:meth:`identity` as canonical JSON: part of every cache key."""
        return json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))

    def weights_folder(self) -> Path | None:
        """The local folder the weights load from, if any (not a hub id, a server or a bundled
        model, whose package version fixes its weights)."""
        return None

    def weights_fingerprint(self) -> str:
        """A short fingerprint of the weights, or "" where the model id alone names them."""
        folder = self.weights_folder()
        return folder_fingerprint(folder) if folder is not None else ""

    def library(self) -> str:
        """The inference library and its version (``name==version``)."""
        return "none"

    def device_name(self) -> str:
        return "cpu"

    def quantization(self) -> str:
        return "none"

    def engine_version(self) -> str:
        return "0"

    # -- backends implement these ------------------------------------------------------------

    @abstractmethod
    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        """Run every conversation through the model; no caching here."""

    def _chat_many(
        self, conversations: Sequence[Conversation], params: Sequence[SamplingParams]
    ) -> list[list[Completion]]:
        """Requests of differing settings: here one ``_chat`` per distinct setting; backends that
        batch rows of different settings together override it."""
        groups: dict[str, list[int]] = {}
        for i, p in enumerate(params):
            groups.setdefault(p.to_json(), []).append(i)
        out: dict[int, list[Completion]] = {}
        for members in groups.values():
            answers = self._chat([conversations[i] for i in members], params[members[0]])
            out.update(zip(members, answers, strict=True))
        return [out[i] for i in range(len(conversations))]

    def _score(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[TokenLogprobs]:
        raise NotImplementedError(f"the {self.backend} engine cannot score continuations")

    def _choice_logprobs(self, prompts: Sequence[Prompt], choices: Sequence[str]) -> list[list[float]]:
        """log P(choice | prompt) per prompt and choice: by default one scored continuation per
        choice (exact for multi-token choices); local backends override it with one forward pass."""
        flat = self._score([p for p in prompts for _ in choices], [c for _ in prompts for c in choices])
        width = len(choices)
        return [
            [sum(t.logprobs) if t.logprobs else float("-inf") for t in flat[i * width : (i + 1) * width]]
            for i in range(len(prompts))
        ]

    def close(self) -> None:  # noqa: B027 - optional hook; most backends hold nothing to release
        """Release models, processes or connections."""

    # -- the cached public interface ---------------------------------------------------------

    def chat(
        self,
        conversations: Sequence[Conversation],
        params: SamplingParams,
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> list[list[Completion]]:
        if tools:
            params = replace(params, tools=[dict(t) for t in tools])
        return self.chat_many([(c, params) for c in conversations])

    def chat_many(self, requests: Sequence[tuple[Conversation, SamplingParams]]) -> list[list[Completion]]:
        """``chat`` for requests whose settings differ (``max_tokens``, ``json_schema``, ``tools``
        in ``params.tools``...): one call, so a backend that batches them together
        (``_chat_many``) decodes few-row requests side by side rather than one after the other.
        Each request is cached under its own settings, as ``chat`` would cache it."""
        identity = self.cache_identity()
        keys = [request_key("chat", identity, params.to_dict(), conv) for conv, params in requests]
        found = self.cache.get_many(keys) if self.cache is not None else {}
        results: dict[str, list[Completion]] = {
            k: [Completion.from_dict(c) for c in v] for k, v in found.items()
        }
        self.stats.cache_hits += sum(1 for k in keys if k in results)
        for chunk in _pending_chunks(list(zip(keys, requests, strict=True)), results, self.chunk_size):
            counted = self._admit(len(chunk))
            started = time.perf_counter()
            _log_calls("sent", [k for k, _ in chunk])
            answers = self._chat_many([c for _, (c, _) in chunk], [p for _, (_, p) in chunk])
            self.stats.seconds += time.perf_counter() - started
            self.stats.requests_sent += len(chunk)
            stored = {}
            for (key, _), completions in zip(chunk, answers, strict=True):
                results[key] = completions
                if any(c.failed for c in completions):
                    self.stats.failed += 1
                    continue  # not cached: a rerun tries it again
                stored[key] = [asdict(c) for c in completions]
                self.stats.prompt_tokens += completions[0].prompt_tokens if completions else 0
                self.stats.completion_tokens += sum(c.completion_tokens for c in completions)
            if self.cache is not None:
                self.cache.put_many("chat", self.model_id, stored)
            _log_calls("done", list(stored))
            self._charge(counted)
        return [results[k] for k in keys]

    def score(self, prompts: Sequence[Prompt], continuations: Sequence[str]) -> list[TokenLogprobs]:
        identity = self.cache_identity()
        keys = [
            request_key("score", identity, {}, {"prompt": p, "continuation": c})
            for p, c in zip(prompts, continuations, strict=True)
        ]
        found = self.cache.get_many(keys) if self.cache is not None else {}
        results = {k: TokenLogprobs(**v) for k, v in found.items()}
        self.stats.cache_hits += sum(1 for k in keys if k in results)
        pairs = [(k, (p, c)) for k, p, c in zip(keys, prompts, continuations, strict=True)]
        for chunk in _pending_chunks(pairs, results, self.chunk_size):
            counted = self._admit(len(chunk))
            started = time.perf_counter()
            _log_calls("sent", [k for k, _ in chunk])
            scored = self._score([p for _, (p, _) in chunk], [c for _, (_, c) in chunk])
            self.stats.seconds += time.perf_counter() - started
            self.stats.requests_sent += len(chunk)
            for (key, _), value in zip(chunk, scored, strict=True):
                results[key] = value
            # a scored request reads its prompt and its continuation (prefill only)
            self.stats.prompt_tokens += sum(self.count_tokens([p for _, (p, _) in chunk]))
            self.stats.prompt_tokens += sum(len(v.tokens) for v in scored)
            if self.cache is not None:
                self.cache.put_many("score", self.model_id, {k: asdict(results[k]) for k, _ in chunk})
            _log_calls("done", [k for k, _ in chunk])
            self._charge(counted)
        return [results[k] for k in keys]

    def choice_logprobs(self, prompts: Sequence[Prompt], choices: Sequence[str]) -> list[list[float]]:
        """For each prompt, the log-probability of each choice as the continuation (unnormalised:
        the choices need not cover the vocabulary). Cached like every other request."""
        if not choices:
            raise ValueError("choice_logprobs needs at least one choice")
        identity = self.cache_identity()
        keys = [request_key("choices", identity, {"choices": list(choices)}, p) for p in prompts]
        found = self.cache.get_many(keys) if self.cache is not None else {}
        results: dict[str, list[float]] = {k: [float(x) for x in v] for k, v in found.items()}
        self.stats.cache_hits += sum(1 for k in keys if k in results)
        for chunk in _pending_chunks(list(zip(keys, prompts, strict=True)), results, self.chunk_size):
            counted = self._admit(len(chunk))
            started = time.perf_counter()
            _log_calls("sent", [k for k, _ in chunk])
            answers = self._choice_logprobs([p for _, p in chunk], choices)
            self.stats.seconds += time.perf_counter() - started
            self.stats.requests_sent += len(chunk)
            for (key, _), values in zip(chunk, answers, strict=True):
                results[key] = [float(v) for v in values]
            self.stats.prompt_tokens += sum(self.count_tokens([p for _, p in chunk]))
            if self.cache is not None:
                # -inf is not JSON: stored as a very small number, read back the same way
                self.cache.put_many(
                    "choices", self.model_id, {k: [max(v, -1e30) for v in results[k]] for k, _ in chunk}
                )
            _log_calls("done", [k for k, _ in chunk])
            self._charge(counted)
        return [results[k] for k in keys]

    def count_tokens(self, prompts: Sequence[Prompt]) -> list[int]:
        """The tokens the model reads for each prompt (the stats and budgets of scored requests): an
        estimate here, about 4 characters a token; backends with a tokenizer count exactly."""
        from ptfactory.engines.budget import estimate_tokens

        return [estimate_tokens(p) for p in prompts]

    def _admit(self, requests: int) -> int:
        """Before a chunk is sent: the budget may refuse it (BudgetExhausted). The tokens counted so far."""
        if self.budget is not None:
            self.budget.admit(self, requests)
        return self.stats.prompt_tokens + self.stats.completion_tokens

    def _charge(self, counted: int) -> None:
        """After a chunk: what it cost, from the tokens it added to the stats (a cache hit adds none)."""
        if self.budget is not None:
            self.budget.charge(self, self.stats.prompt_tokens + self.stats.completion_tokens - counted)

    def describe(self) -> dict[str, str]:
        return {"engine": self.backend, "model": self.model_id}


def _pending_chunks(
    items: list[tuple[str, Any]], done: dict[str, Any], size: int
) -> Iterator[list[tuple[str, Any]]]:
    """Chunks of the requests not yet answered, each sent once.

    Chunk boundaries are fixed over the whole request list (not over what is left), so a rerun
    after a crash sends the same chunks the first run would have: batch-dependent sampling
    (transformers seeds once per batch) then gives the same text as an uninterrupted run.
    """
    first: dict[str, Any] = {}
    for key, value in items:
        first.setdefault(key, value)  # identical requests in one call are sent once
    unique = list(first.items())
    for start in range(0, len(unique), max(size, 1)):
        pending = [(k, v) for k, v in unique[start : start + size] if k not in done]
        if pending:
            yield pending


def _log_calls(event: str, keys: list[str]) -> None:
    """Append ``sent KEY`` before and ``done KEY`` after each request to ``$PTF_ENGINE_CALL_LOG``:
    an audit trail of what reached the backend (the resume tests check that no finished request
    is ever sent again)."""
    path = os.environ.get("PTF_ENGINE_CALL_LOG")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(f"{event} {k}\n" for k in keys))
        handle.flush()
        os.fsync(handle.fileno())
