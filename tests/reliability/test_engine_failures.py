"""An engine that keeps failing for some requests: retried, then recorded per sample; the batch goes on.

A real HTTP server speaking the OpenAI chat API answers every prompt but the poisoned ones, which
get HTTP 500 every time (and one slow reply that times out)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pyarrow as pa
import pytest

from ptfactory.engines.openai_engine import OpenAIEngine
from ptfactory.generators.config import SamplingConfig
from ptfactory.generators.responses import generate_responses
from ptfactory.storage.schema import from_records, sample_id


class _Server(BaseHTTPRequestHandler):
    calls: ClassVar[dict[str, int]] = {}

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        _Server.calls[prompt] = _Server.calls.get(prompt, 0) + 1
        if "poison" in prompt:
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"upstream exploded")
            return
        if "slow" in prompt:
            time.sleep(4.0)
        reply = {
            "choices": [{"message": {"content": f"answer to {prompt}"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3},
        }
        data = json.dumps(reply).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and hung up: that is the point of the slow prompt


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    _Server.calls = {}
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/v1"
    finally:
        httpd.shutdown()


def _instructions(prompts: list[str]) -> pa.Table:
    records = []
    for i, prompt in enumerate(prompts):
        messages = [{"role": "user", "content": prompt}]
        records.append(
            {
                "sample_id": sample_id("sft", messages),
                "batch": "b1",
                "kind": "sft",
                "messages": messages,
                "provenance": {"method": "seed", "seed_task_id": f"t{i}"},
                "decisions": [{"stage": "seed", "verdict": "keep", "reason": "seed", "detail": None}],
            }
        )
    return from_records(records)


def test_failing_requests_are_retried_then_recorded_per_sample(server: str) -> None:
    prompts = ["Say hi.", "poison: fail me", "Name a color.", "slow: time out", "Count to three."]
    table = _instructions(prompts)
    engine = OpenAIEngine(model_id="m", base_url=server, backoff_s=0.01, max_retries=2, timeout_s=1.5)
    rows, _ = generate_responses(table, table, engine, SamplingConfig(n=1, max_tokens=8))

    by_prompt = {r["messages"][0]["content"]: r for r in rows.to_pylist()}
    assert set(by_prompt) == set(prompts)  # every sample is there, the failed ones too
    for prompt in ("poison: fail me", "slow: time out"):
        last = by_prompt[prompt]["decisions"][-1]
        assert (last["verdict"], last["reason"]) == ("drop", "engine_error")
        assert "failed after 3 attempts" in last["detail"]
        assert _Server.calls[prompt] == 3  # tried, retried, then given up on
    for prompt in ("Say hi.", "Name a color.", "Count to three."):
        assert by_prompt[prompt]["messages"][-1]["content"] == f"answer to {prompt}"
        assert by_prompt[prompt]["decisions"][-1]["verdict"] == "keep"
    assert engine.stats.failed == 2
