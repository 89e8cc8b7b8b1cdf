"""Cache semantics with a scripted backend (pure logic: the real backends have their own tests)."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ptfactory.engines.base import Completion, Conversation, Engine, SamplingParams
from ptfactory.engines.cache import ResponseCache, request_key


@dataclass
class Echo(Engine):
    calls: list[int] = field(default_factory=list)

    def _chat(self, conversations: Sequence[Conversation], params: SamplingParams) -> list[list[Completion]]:
        self.calls.append(len(conversations))
        return [[Completion(c[-1]["content"].upper(), 1, 1) for _ in range(params.n)] for c in conversations]


def _conv(i: int) -> Conversation:
    return [{"role": "user", "content": f"q{i}"}]


def test_keys_depend_on_model_params_and_messages() -> None:
    base = request_key("chat", "m", SamplingParams().to_dict(), _conv(1))
    assert base == request_key("chat", "m", SamplingParams().to_dict(), _conv(1))
    assert base != request_key("chat", "m2", SamplingParams().to_dict(), _conv(1))
    assert base != request_key("chat", "m", SamplingParams(temperature=0.1).to_dict(), _conv(1))
    assert base != request_key("chat", "m", SamplingParams().to_dict(), _conv(2))
    assert base != request_key("score", "m", SamplingParams().to_dict(), _conv(1))


def test_each_chunk_is_cached_and_only_misses_are_sent(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    engine = Echo(model_id="m", cache=cache, chunk_size=3)
    out = engine.chat([_conv(i) for i in range(7)], SamplingParams(n=2))
    assert [g[0].text for g in out] == [f"Q{i}" for i in range(7)]
    assert engine.calls == [3, 3, 1]
    assert len(cache) == 7
    again = Echo(model_id="m", cache=cache, chunk_size=3)
    again.chat([_conv(i) for i in range(9)], SamplingParams(n=2))
    assert again.calls == [2]  # only q7 and q8 were new; they sit in the third fixed chunk
    assert again.stats.cache_hits == 7


def test_duplicate_requests_in_one_call_are_sent_once(tmp_path: Path) -> None:
    engine = Echo(model_id="m", cache=ResponseCache(tmp_path / "c.sqlite"))
    out = engine.chat([_conv(1), _conv(1), _conv(2)], SamplingParams())
    assert engine.calls == [2]
    assert [g[0].text for g in out] == ["Q1", "Q1", "Q2"]


def test_call_log_records_sent_and_done(tmp_path: Path, monkeypatch: object) -> None:
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    log = tmp_path / "calls.log"
    monkeypatch.setenv("PTF_ENGINE_CALL_LOG", str(log))
    Echo(model_id="m", chunk_size=2).chat([_conv(i) for i in range(3)], SamplingParams())
    events = [line.split()[0] for line in log.read_text().splitlines()]
    assert events == ["sent", "sent", "done", "done", "sent", "done"]
