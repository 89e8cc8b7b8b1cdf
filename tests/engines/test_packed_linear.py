"""Float32 layers reading packed bfloat16 copies of bfloat16-valued weights
(engines/packed_linear.py, engines/bf16_linear.c): the same products as torch's, on the same
path the engine takes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ptfactory.engines import packed_linear
from ptfactory.engines.base import SamplingParams
from ptfactory.engines.packed_linear import ROWS, kernel, pack_linears, prefilling, wants_packing
from ptfactory.engines.transformers_engine import TransformersEngine


def _bf16_linear(inputs: int, outputs: int, bias: bool, seed: int = 0) -> torch.nn.Linear:
    torch.manual_seed(seed)
    layer = torch.nn.Linear(inputs, outputs, bias=bias)
    with torch.no_grad():
        layer.weight.copy_(layer.weight.to(torch.bfloat16).float())  # bfloat16 values, held as float32
    return layer


def test_the_kernel_builds_on_this_machine() -> None:
    # CI's machine has a C compiler: a kernel that did not build would silently leave layers as
    # they are, and every other test here would pass without the kernel
    assert kernel() is not None


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("inputs", "outputs"), [(96, 64), (33, 50), (7, 1), (576, 100), (1536, 32)])
@pytest.mark.parametrize("bias", [False, True])
def test_packed_layers_compute_what_torch_computes(
    threads: int, inputs: int, outputs: int, bias: bool
) -> None:
    plain = _bf16_linear(inputs, outputs, bias)
    packed = _bf16_linear(inputs, outputs, bias)
    assert pack_linears(packed) == 1
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            # every row-count path of the kernel (8, 4, 2, 1 at a time), its widest and past it
            for rows in (1, 2, 3, 5, 8, 9, 15, 17, ROWS, ROWS + 1):
                x = torch.randn(2, rows, inputs)[:1]  # a view: the kernel needs contiguous rows
                want, got = plain(x), packed(x)
                assert got.shape == want.shape == (1, rows, outputs)
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * inputs**0.5)
    finally:
        torch.set_num_threads(before)


def test_a_layer_whose_weights_bfloat16_would_round_is_left_alone() -> None:
    model = torch.nn.Sequential(_bf16_linear(16, 32, False), torch.nn.Linear(32, 8))
    assert pack_linears(model) == 1
    assert hasattr(model[0], "packed_bf16") and not hasattr(model[1], "packed_bf16")
    x = torch.randn(3, 16)
    with torch.inference_mode():
        torch.testing.assert_close(
            model[1](model[0](x)), torch.nn.functional.linear(model[0](x), model[1].weight, model[1].bias)
        )


def test_wide_inputs_and_gradients_keep_the_layers_own_forward() -> None:
    layer = _bf16_linear(24, 40, True)
    calls: list[int] = []

    def own(x: torch.Tensor) -> torch.Tensor:  # e.g. a vocabulary head's slices (kept_logits.py)
        calls.append(x.shape[0])
        return torch.nn.functional.linear(x, layer.weight, layer.bias)

    layer.forward = own  # type: ignore[method-assign]
    pack_linears(layer)
    with torch.inference_mode():
        layer(torch.randn(ROWS, 24))
        assert calls == []  # narrow: the kernel
        layer(torch.randn(ROWS + 1, 24))
        assert calls == [ROWS + 1]
    layer(torch.randn(2, 24, requires_grad=True)).sum().backward()  # the kernel has no gradient
    assert calls == [ROWS + 1, 2] and layer.weight.grad is not None


@pytest.mark.parametrize("wins", [True, False])
def test_a_prefill_takes_the_kernel_at_any_width_where_it_wins(
    monkeypatch: pytest.MonkeyPatch, wins: bool
) -> None:
    layer = _bf16_linear(24, 40, True)
    calls: list[int] = []

    def own(x: torch.Tensor) -> torch.Tensor:
        calls.append(x.shape[0])
        return torch.nn.functional.linear(x, layer.weight, layer.bias)

    layer.forward = own  # type: ignore[method-assign]
    pack_linears(layer)
    monkeypatch.setattr(packed_linear, "kernel_wins_wide", lambda: wins)
    x = torch.randn(3 * ROWS, 24)
    with torch.inference_mode():
        with prefilling():
            got = layer(x)
        assert calls == ([] if wins else [3 * ROWS])
        torch.testing.assert_close(got, torch.nn.functional.linear(x, layer.weight, layer.bias))
        layer(x)  # outside a prefill (scoring): the layer's own wide path, whatever wins
        assert calls == ([3 * ROWS] if wins else [3 * ROWS] * 2)


def test_the_kernel_wins_wide_on_amd_avx512_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for vendor, flags, wins in [
        ("AuthenticAMD", "fpu avx2 avx512f", True),
        ("AuthenticAMD", "fpu avx2", False),
        ("GenuineIntel", "fpu avx2 avx512f amx_bf16", False),
    ]:
        fields = {"vendor_id": vendor, "flags": flags}
        monkeypatch.setattr(packed_linear, "_cpu_field", fields.__getitem__)
        packed_linear.cpu_flags.cache_clear()
        packed_linear.kernel_wins_wide.cache_clear()
        assert packed_linear.kernel_wins_wide() is wins
    monkeypatch.undo()
    packed_linear.cpu_flags.cache_clear()
    packed_linear.kernel_wins_wide.cache_clear()


def test_packing_is_for_float32_on_a_cpu_and_a_setting_decides() -> None:
    assert wants_packing("cpu", "float32", True)
    assert not wants_packing("cpu", "float32", False)
    assert not wants_packing("cuda", "float32", True)
    assert not wants_packing("cpu", "bfloat16", True)


def test_the_bundled_model_greedy_answers_are_those_of_plain_float32(smollm2: Path) -> None:
    prompts = [
        [{"role": "user", "content": q}]
        for q in (
            "What is the capital of France?",
            "Write a python function that adds two numbers.",
            "Name three colours.",
            "Why is the sky blue?",
        )
    ]
    params = SamplingParams(max_tokens=24, temperature=0.0, seed=0)
    texts = {}
    for packed in (True, False):
        engine = TransformersEngine(
            model_id="smollm2", model_path=str(smollm2), packed_weights=packed, threads=2
        )
        model, _ = engine._load()
        layers = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
        assert sum(hasattr(m, "packed_bf16") for m in layers) == (len(layers) if packed else 0)
        assert ("packed=bf16" in engine.engine_version()) is packed  # cache keys tell them apart
        assert engine._streams(decoding=True) == (1 if packed else 2)  # one batch streams the weights once
        texts[packed] = [g[0].text for g in engine.chat(prompts, params)]
        engine.close()
    assert texts[True] == texts[False]
    assert all(texts[True])


def test_a_float32_checkpoint_keeps_its_weights_and_its_two_streams(tiny_model: Path) -> None:
    # the tests' tiny model is saved in float32: no layer's weights are all bfloat16 values
    engine = TransformersEngine(model_id="tiny", model_path=str(tiny_model), packed_weights=True, threads=2)
    engine._load()
    assert engine._packed == 0
    assert engine._streams(decoding=True) == 2  # nothing packed: two batches side by side, as before
