"""How fast the CPU's matrix products stream a decoder's weights at a few rows: the ceiling of
float32 greedy generation at a fixed batch.

    python bench/small_gemm.py [--rows 1,8,32] [--threads 2] [--repeats 5]

The weights: SmolLM2-135M's shapes (30 layers of q, k, v, o, gate, up, down, and the 49k-token
vocabulary head), random float32, each its own tensor (540 MB, past the caches), multiplied by
``rows`` activations each, as one decoding step does. Ways: torch's ``linear`` (what transformers
runs), numpy's ``dot`` (OpenBLAS), and weights prepacked once for MKL
(``torch.ops.mkl._mkl_linear``) and for oneDNN (``torch.ops.mkldnn._linear_pointwise``), and the
engine's packed bfloat16 copies (``engines/packed_linear.py``; the weights are bfloat16 values, as
a bfloat16 checkpoint's are, so it computes from the same values and reads half the bytes). Prints
the best of ``repeats`` passes in ms, the float32 weight bytes per second (for the packed way: what
float32 weights would have to stream to keep up), and whether each way's result equals
``linear``'s bit for bit (the bench's agreement check needs the same greedy tokens).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch

LAYER = [(576, 576), (192, 576), (192, 576), (576, 576), (1536, 576), (1536, 576), (576, 1536)]
SHAPES = LAYER * 30 + [(49152, 576)]


def _ways(weights: list[torch.Tensor], rows: int) -> dict[str, list[Callable[[torch.Tensor], object]]]:
    transposed = [w.numpy().T for w in weights]
    ways: dict[str, list[Callable[[torch.Tensor], object]]] = {
        "torch linear": [lambda x, w=w: torch.nn.functional.linear(x, w) for w in weights],
        "numpy dot (OpenBLAS)": [lambda x, w=w: np.dot(x.numpy(), w) for w in transposed],
    }
    if torch._C.has_mkl:
        packed = [torch.ops.mkl._mkl_reorder_linear_weight(w, rows) for w in weights]
        ways["MKL prepacked"] = [
            lambda x, p=p, w=w: torch.ops.mkl._mkl_linear(x, p, w, None, rows)
            for p, w in zip(packed, weights, strict=True)
        ]
    from ptfactory.engines.packed_linear import kernel, pack, packed_linear

    if kernel() is not None:  # the engine's packed bfloat16 copies (engines/packed_linear.py)
        copies = [pack(w.to(torch.bfloat16)) for w in weights]
        ways["packed bfloat16 (ptfactory)"] = [
            lambda x, p=p, w=w: packed_linear(x, p, w, None) for p, w in zip(copies, weights, strict=True)
        ]
    if torch.backends.mkldnn.is_available():
        packed = [torch.ops.mkldnn._reorder_linear_weight(w, rows) for w in weights]
        ways["oneDNN prepacked"] = [
            lambda x, p=p: torch.ops.mkldnn._linear_pointwise(x, p, None, "none", [], "") for p in packed
        ]
    return ways


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", default="1,8,32")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    # bfloat16 values held as float32, as a bfloat16 checkpoint loads: every way computes from the same
    weights = [torch.randn(*shape).to(torch.bfloat16).float() for shape in SHAPES]
    nbytes = sum(w.numel() * 4 for w in weights)
    print(
        f"{len(weights)} weights, {nbytes / 1e6:.0f} MB float32, {args.threads} threads, best of {args.repeats}"
    )
    print("| rows | way | ms | weight GB/s | equals linear |\n|---|---|---|---|---|")
    with torch.inference_mode():
        for rows in (int(r) for r in args.rows.split(",")):
            inputs = {k: torch.randn(rows, k) for k in {s[1] for s in SHAPES}}
            probe = torch.randn(rows, 576)
            reference = torch.nn.functional.linear(probe, weights[4])
            for name, calls in _ways(weights, rows).items():
                best = float("inf")
                for _ in range(args.repeats):
                    started = time.perf_counter()
                    for w, call in zip(weights, calls, strict=True):
                        call(inputs[w.shape[1]])
                    best = min(best, time.perf_counter() - started)
                same = torch.equal(torch.as_tensor(np.asarray(calls[4](probe))), reference)
                print(
                    f"| {rows} | {name} | {best * 1e3:.1f} | {nbytes / best / 1e9:.1f} | {'yes' if same else 'no'} |"
                )


if __name__ == "__main__":
    main()
