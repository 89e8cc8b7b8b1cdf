"""Scoring's wide matrix products in bfloat16, on a CPU with bfloat16 units (AMX, AVX512-BF16).

Scoring (IFD, the likelihood and probability judges) is a prefill: hundreds of positions through
every layer, bound by float32 arithmetic. Where a layer's weights are bfloat16 values (most
checkpoints, the bundled ones among them), a bfloat16 copy of them is exact, and a product with the
input rounded to bfloat16 runs on the CPU's bfloat16 units: on the AVX-512 + AMX box
``bench/engines.py`` scored IFD at 26.0 rows/s against float32's 12.8 (2.0x), the IFD values ranked
alike (Spearman 0.998 over its 32 rows), and ``bench/judges.py`` gave the likelihood judges the same
AUC on every source, 2.1-2.4x faster.

Two other ways were measured and dropped: oneDNN's float32 products with bfloat16 internals
(``torch.backends.mkldnn.matmul.fp32_precision = "bf16"``: float32 outputs, but it converts every
weight on every call, 1.4x slower than the copies here, and the setting is one for the whole
process); and bfloat16 throughout (``dtype: bfloat16``: norms and attention rounded too).

Generation never takes this path: a rounded prefill changes which token wins where two are close
(bfloat16 throughout kept 69 % of greedy outputs), so it keeps float32 products. Within
:func:`bfloat16_products` (a thread's scoring batch) and on inputs without gradients, layers
holding a copy multiply in bfloat16 and return float32; norms, attention and the log-softmax stay
float32. A layer whose weights bfloat16 would round keeps float32.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from typing import Any

from ptfactory.engines.packed_linear import bfloat16_linears, cpu_flags
from ptfactory.errors import EngineError

__all__ = ["SCORE_DTYPES", "bfloat16_products", "in_bfloat16", "keep_bfloat16_copies", "wants_bf16_scoring"]

SCORE_DTYPES = ("auto", "float32", "bfloat16")
_state = threading.local()


def wants_bf16_scoring(device: str, dtype: str, chosen: str = "auto") -> bool:
    """Whether a float32 model scores through bfloat16 products: ``chosen`` (the engine's
    ``score_dtype``) where it names one; by default on a CPU with bfloat16 units, where it was
    measured faster (elsewhere the products are emulated)."""
    if chosen not in SCORE_DTYPES:
        raise EngineError(f"score_dtype {chosen!r} is not one of {', '.join(SCORE_DTYPES)}")
    if dtype != "float32" or chosen == "float32":
        return False
    if device != "cpu":
        if chosen == "bfloat16":
            raise EngineError(
                f"score_dtype bfloat16 runs a float32 model's products on a CPU's bfloat16 units; on "
                f"device {device!r} give the model dtype: bfloat16 instead"
            )
        return False
    return chosen == "bfloat16" or bool({"amx_bf16", "avx512_bf16"} & cpu_flags())


@contextlib.contextmanager
def bfloat16_products(on: bool = True) -> Iterator[None]:
    """Within this block (this thread's work alone), layers holding a bfloat16 copy multiply in
    bfloat16."""
    before = in_bfloat16()
    _state.on = on
    try:
        yield
    finally:
        _state.on = before


def in_bfloat16() -> bool:
    return bool(getattr(_state, "on", False))


def keep_bfloat16_copies(model: Any) -> int:
    """Give every float32 ``Linear`` of ``model`` whose weights are all bfloat16 values a bfloat16
    copy, used inside :func:`bfloat16_products`; how many layers got one."""
    kept = 0
    for module, copy in bfloat16_linears(model):
        module.weight_bf16 = copy.contiguous()
        module.forward = functools.partial(_forward, module, module.forward)
        kept += 1
    return kept


def _forward(module: Any, plain: Any, x: Any) -> Any:
    import torch

    if not in_bfloat16() or x.dtype != torch.float32 or torch.is_grad_enabled():
        return plain(x)
    y = torch.nn.functional.linear(x.to(torch.bfloat16), module.weight_bf16).float()
    return y if module.bias is None else y + module.bias
