"""The openai backend against a real vLLM OpenAI-compatible server, and its retry policy."""

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx
import pytest

from ptfactory.engines.base import Completion, SamplingParams, TokenLogprobs
from ptfactory.engines.openai_engine import OpenAIEngine
from ptfactory.engines.scoring import score_token_ids
from ptfactory.engines.transformers_engine import TransformersEngine
from ptfactory.errors import EngineError
from tests.engines.servers import free_port, vllm_server

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def server(smollm2: Path) -> Iterator[str]:
    with vllm_server(smollm2) as base:
        yield base


@pytest.mark.integration
def test_real_server_chat_n_json_and_score(server: str) -> None:
    engine = OpenAIEngine(
        model_id="SmolLM2-135M-Instruct", served_model="smol", base_url=server, max_concurrency=4
    )
    conversations = [[{"role": "user", "content": f"Say a word about the number {i}."}] for i in range(6)]
    groups = engine.chat(conversations, SamplingParams(n=2, max_tokens=12, temperature=0.9, logprobs=1))
    assert all(len(g) == 2 for g in groups)
    assert all(g[0].prompt_tokens > 0 and g[0].completion_tokens > 0 for g in groups)
    assert groups[0][0].logprobs and len(groups[0][0].logprobs) == groups[0][0].completion_tokens
    (answer,) = engine.chat([QUESTION], SamplingParams(max_tokens=12, temperature=0))[0]
    assert "Paris" in answer.text
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
    (reply,) = engine.chat([QUESTION], SamplingParams(max_tokens=30, temperature=0, json_schema=schema))[0]
    assert isinstance(json.loads(reply.text)["score"], int)
    right, wrong = engine.score([QUESTION, QUESTION], ["The capital is Paris.", "The capital is Banana."])
    assert right.tokens[0] == "The"
    assert right.mean_nll < wrong.mean_nll


@pytest.mark.integration
def test_real_server_scores_what_the_transformers_backend_scores(server: str, smollm2: Path) -> None:
    """The same chat-template rendering, token ids and log-probabilities (within 1e-3) as the
    embedded backend on SmolLM2: a conversation, one with a system turn, no prompt (IFD's
    unconditioned pass) and a plain completion prompt."""
    remote = OpenAIEngine(model_id="SmolLM2-135M-Instruct", served_model="smol", base_url=server)
    local = TransformersEngine(model_id="SmolLM2-135M-Instruct", model_path=str(smollm2), threads=2)
    prompts: list = [
        QUESTION,
        [{"role": "system", "content": "You answer in one word."}, {"role": "user", "content": "A colour?"}],
        [],
        "Q: what is 2 + 2?\nA:",
    ]
    conts = ["The capital of France is Paris.", "Blue, like the sea.", "Paris is a city in France.", " 4"]
    _, tokenizer = local._load()
    root = server.removesuffix("/v1")
    for prompt, cont in zip(prompts[:2], conts, strict=False):  # the server renders as the template does
        served = httpx.post(
            f"{root}/tokenize", json={"model": "smol", "messages": prompt, "add_generation_prompt": True}
        ).json()["tokens"]
        assert served == score_token_ids(tokenizer, prompt, cont)[0]
    for prompt, cont, got, want in zip(
        prompts, conts, remote.score(prompts, conts), local.score(prompts, conts), strict=True
    ):
        ids = score_token_ids(tokenizer, prompt, cont)[1]
        served = httpx.post(
            f"{root}/tokenize", json={"model": "smol", "prompt": cont, "add_special_tokens": False}
        ).json()["tokens"]
        assert served == ids and len(got.logprobs) == len(ids) == len(want.logprobs)
        assert "".join(got.tokens) == "".join(want.tokens) == cont
        assert max(abs(a - b) for a, b in zip(got.logprobs, want.logprobs, strict=True)) < 1e-3


@pytest.mark.integration
def test_real_server_from_inside_a_running_event_loop(server: str) -> None:
    """As in a Jupyter cell: chat and score are called while an event loop runs in this thread."""
    engine = OpenAIEngine(model_id="SmolLM2-135M-Instruct", served_model="smol", base_url=server)
    fruit = [{"role": "user", "content": "Name a fruit."}]

    async def cell() -> tuple[list[list[Completion]], list[TokenLogprobs]]:
        asyncio.get_running_loop()  # raises unless a loop is running here: the case under test
        groups = engine.chat([QUESTION, fruit], SamplingParams(max_tokens=12, temperature=0))
        return groups, engine.score([QUESTION], ["The capital is Paris."])

    groups, (scored,) = asyncio.run(cell())
    assert [len(g) for g in groups] == [1, 1]
    assert "Paris" in groups[0][0].text
    assert all(c.completion_tokens > 0 and not c.failed for g in groups for c in g)
    assert scored.tokens[0] == "The" and all(lp <= 0 for lp in scored.logprobs)
    assert engine.stats.requests_sent == 3


def test_unreachable_server_is_one_clear_error() -> None:
    engine = OpenAIEngine(
        model_id="m", base_url=f"http://127.0.0.1:{free_port()}/v1", max_retries=1, backoff_s=0.01
    )
    with pytest.raises(EngineError, match=r"is unreachable.*start it or fix the engine's base_url"):
        engine.chat([QUESTION], SamplingParams())


class _Flaky(BaseHTTPRequestHandler):
    """Fails the first two requests with 503 and 429, then answers (a stub for the retry logic)."""

    calls = 0

    def do_POST(self) -> None:
        type(self).calls += 1
        self.rfile.read(int(self.headers["Content-Length"]))
        if type(self).calls <= 2:
            self.send_response(503 if type(self).calls == 1 else 429)
            self.end_headers()
            return
        body = json.dumps(
            {
                "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return


def test_429_and_5xx_are_retried_with_backoff() -> None:
    httpd = HTTPServer(("127.0.0.1", 0), _Flaky)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        engine = OpenAIEngine(
            model_id="m", base_url=f"http://127.0.0.1:{httpd.server_port}/v1", backoff_s=0.01
        )
        (reply,) = engine.chat([QUESTION], SamplingParams())[0]
        assert reply.text == "ok"
        assert _Flaky.calls == 3
        _Flaky.calls = -100  # every request now fails: the error names the status after the retries
        engine = OpenAIEngine(
            model_id="m", base_url=f"http://127.0.0.1:{httpd.server_port}/v1", backoff_s=0.001, max_retries=2
        )
        # a request that still fails after its retries is recorded for its sample, not fatal
        (failed,) = engine.chat([[{"role": "user", "content": "again"}]], SamplingParams())[0]
        assert failed.failed and failed.text == ""
        assert re.search(r"failed after 3 attempts: HTTP 429", failed.finish_reason)
        assert engine.stats.failed == 1
    finally:
        httpd.shutdown()
