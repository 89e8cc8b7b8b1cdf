"""Scoring's matrix products in bfloat16, on a CPU with bfloat16 units (AMX, AVX512-BF16).

Scoring (IFD, the likelihood and probability judges) is a prefill: hundreds of positions through
every layer, bound by float32 arithmetic. oneDNN can run torch's float32 products with their
inputs rounded to bfloat16, accumulated and returned in float32
(``torch.backends.mkldnn.matmul.fp32_precision = "bf16"``): on the AVX-512 + AMX box a 480-row
product of SmolLM2's ran 4x faster, and the bench's IFD 1.8x (``bench/engines.py``:
``transformers`` against ``transformers-float32``), its values ranked alike (Spearman 0.998).
Generation never takes this path: a rounded prefill changes which token wins where two are close
(bfloat16 throughout kept 69 % of greedy outputs), so it keeps float32 products.

Applied only to models whose ``Linear`` weights are all bfloat16 values (most checkpoints,
the bundled ones among them): the weights then lose nothing, only each product's input is rounded.

torch's setting is one for the whole process, so a gate keeps the two kinds of work apart: while
any thread scores through bfloat16 products (:func:`bfloat16_products`), a thread asking for
float32 ones (:func:`float32_products`, generation) waits, and the other way round.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from ptfactory.engines.packed_linear import cpu_flags, exact_bfloat16
from ptfactory.errors import EngineError

__all__ = [
    "SCORE_DTYPES",
    "bfloat16_products",
    "bfloat16_valued",
    "float32_products",
    "wants_bf16_scoring",
]

SCORE_DTYPES = ("auto", "float32", "bfloat16")


def wants_bf16_scoring(device: str, dtype: str, chosen: str = "auto") -> bool:
    """Whether a float32 model scores through bfloat16 products: ``chosen`` (the engine's
    ``score_dtype``) where it names one; by default on a CPU with bfloat16 units, where it was
    measured faster (elsewhere oneDNN emulates them)."""
    if chosen not in SCORE_DTYPES:
        raise EngineError(f"score_dtype {chosen!r} is not one of {', '.join(SCORE_DTYPES)}")
    if dtype != "float32" or chosen == "float32":
        return False
    if device != "cpu":
        if chosen == "bfloat16":
            raise EngineError(
                f"score_dtype bfloat16 runs float32 models' products on a CPU's bfloat16 units; on "
                f"device {device!r} give the model dtype: bfloat16 instead"
            )
        return False
    if not _settable():
        return False
    return chosen == "bfloat16" or bool({"amx_bf16", "avx512_bf16"} & cpu_flags())


def bfloat16_valued(model: Any) -> bool:
    """Whether every float32 ``Linear`` of ``model`` holds bfloat16 values alone."""
    import torch

    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    return bool(linears) and all(
        m.weight.dtype != torch.float32 or exact_bfloat16(m.weight) is not None for m in linears
    )


def _settable() -> bool:
    import torch

    return hasattr(getattr(torch.backends.mkldnn, "matmul", None), "fp32_precision")


class _Gate:
    """Threads in one mode (``bf16`` or ``ieee``) at a time; the first in sets torch's setting, the
    last out puts back what it was."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._mode: str | None = None
        self._holders = 0
        self._before = ""

    @contextlib.contextmanager
    def hold(self, mode: str) -> Iterator[None]:
        import torch

        setting = torch.backends.mkldnn.matmul  # type: ignore[attr-defined]  # torch >= 2.9
        with self._cond:
            self._cond.wait_for(lambda: self._mode in (None, mode))
            if self._holders == 0:
                self._mode, self._before = mode, setting.fp32_precision
                if mode == "bf16":
                    setting.fp32_precision = "bf16"
            self._holders += 1
        try:
            yield
        finally:
            with self._cond:
                self._holders -= 1
                if self._holders == 0:
                    setting.fp32_precision = self._before
                    self._mode = None
                    self._cond.notify_all()


_GATE = _Gate()


@contextlib.contextmanager
def bfloat16_products(on: bool = True) -> Iterator[None]:
    """Within this block, float32 matrix products round their inputs to bfloat16 (every thread's:
    :func:`float32_products` blocks wait meanwhile). ``on=False``: a plain block."""
    if not on:
        yield
        return
    with _GATE.hold("bf16"):
        yield


@contextlib.contextmanager
def float32_products() -> Iterator[None]:
    """Within this block, float32 matrix products are float32 (waits out any bfloat16 scoring)."""
    if not _settable():
        yield
        return
    with _GATE.hold("ieee"):
        yield
