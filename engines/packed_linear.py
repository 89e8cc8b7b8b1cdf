"""Float32 decoding steps that read bfloat16 weights: half the bytes, the same values.

Most checkpoints hold bfloat16 weights (the bundled SmolLM2 and Gemma 3 among them). Loaded as
float32 for float32 arithmetic, every decoding step streams twice the bytes those values need,
and a step at a few rows is bound by that stream: on the 2-core box MKL ran SmolLM2's 211
matrix products at 8 rows in 46 ms (12 GB/s of weights). Where every weight of a ``Linear`` is a
bfloat16 value, this module keeps a bfloat16 copy packed for a small kernel
(``bf16_linear.c``) that widens each weight to float32 in registers (exact) and multiplies in
float32: 16 ms at 8 rows, 13 ms at 1 against 22 (``bench/small_gemm.py``). Outputs are float32 products of
the same weights; only the order of each sum differs from MKL's, as MKL's differs between batch
sizes (``bench/engines.py``: 100 % of greedy outputs the same as plain float32).

Wide inputs (a prefill, scoring: more than ``ROWS`` rows) are compute-bound and stay on torch's
matrix product, so the float32 weight is kept too.

The kernel is built with the machine's C compiler on first use (about a second) into
``~/.cache/ptfactory/kernels``, named by the source, the compiler and the CPU; where no compiler
builds it, layers stay as they are and a warning says why.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "ROWS",
    "bfloat16_linears",
    "cpu_flags",
    "kernel",
    "load",
    "pack_linears",
    "packed_linear",
    "wants_packing",
]

log = logging.getLogger(__name__)

BLOCK = 32  # output columns a packed block holds (bf16_linear.c)
ROWS = 64  # inputs of up to this many rows take the kernel (faster to 64 here); wider ones torch's matmul
_prefilling = threading.local()
SOURCE = Path(__file__).with_name("bf16_linear.c")


def wants_packing(device: str, dtype: str, chosen: bool | None = None) -> bool:
    """Whether float32 layers on ``device`` read packed weights: ``chosen`` (the engine's
    ``packed_weights``) where set; by default on a CPU with AVX-512, where it was measured faster.
    Only float32 on a CPU packs."""
    wanted = "avx512f" in cpu_flags() if chosen is None else chosen
    return device == "cpu" and dtype == "float32" and wanted


@contextlib.contextmanager
def prefilling() -> Iterator[None]:
    """Within: a decoding loop's prefill, whose wide products take the kernel too where
    ``kernel_wins_wide``. Scoring's stay on their wide path (bfloat16 on CPUs with its units)."""
    before = getattr(_prefilling, "on", False)
    _prefilling.on = kernel_wins_wide()
    try:
        yield
    finally:
        _prefilling.on = before


@functools.cache
def kernel_wins_wide() -> bool:
    """Whether the kernel outruns torch's matrix product at every width, as measured on AMD's
    AVX-512 CPUs (an EPYC, 2 threads, SmolLM2's shapes at 64-200 rows: 214-219 GFLOP/s against
    torch's 163-190); on Intel's (Xeon, AMX) torch's was the faster past 64 rows."""
    return _cpu_field("vendor_id") == "AuthenticAMD" and "avx512f" in cpu_flags()


@functools.cache
def cpu_flags() -> frozenset[str]:
    return frozenset(_cpu_field("flags").split())


def _cpu_field(name: str) -> str:
    """A field of /proc/cpuinfo's first processor ("" where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    line = next((line for line in text.splitlines() if line.split(":")[0].strip() == name), "")
    return line.partition(":")[2].strip()


@functools.cache
def kernel() -> Any | None:
    """The built kernel's ``bf16_linear`` function, or None (with a warning) where it cannot be
    built."""
    library = load(SOURCE)
    if library is None:
        return None
    function = library.bf16_linear
    function.restype = None
    int64, pointer = ctypes.c_int64, ctypes.c_void_p
    function.argtypes = [pointer, int64, int64, pointer, int64, pointer, ctypes.c_int]
    return function


def load(*sources: Path, lost: str = "float32 layers read float32 weights") -> Any | None:
    """The shared library of ``sources`` (built with the machine's compiler once per source,
    compiler and CPU), loaded; None, with a warning saying what is ``lost``, where it cannot be
    built."""
    library = _build(sources, lost)
    if library is None:
        return None
    # OpenMP: torch has loaded its libgomp.so.1 already, so the kernel shares torch's runtime
    import torch  # noqa: F401

    return ctypes.CDLL(str(library))


def _build(sources: tuple[Path, ...], lost: str) -> Path | None:
    """The shared library of ``sources``, built once for them, the compiler and the CPU."""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        log.warning("no C compiler (cc): %s (install gcc to speed them)", lost)
        return None
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        log.warning("C compiler %s does not run (%s): %s", compiler, exc, lost)
        return None
    text = b"".join(source.read_bytes() for source in sources)
    key = hashlib.sha256(text + version + " ".join(sorted(cpu_flags())).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ptfactory" / "kernels"
    library = cache / f"{sources[-1].stem}-{key}.so"
    if library.exists():
        return library
    cache.mkdir(parents=True, exist_ok=True)
    # built beside its place and renamed into it: processes building at once each land a whole file
    fd, tmp = tempfile.mkstemp(dir=cache, suffix=".so")
    os.close(fd)
    flags = ["-O3", "-march=native", "-ffp-contract=fast", "-fopenmp", "-shared", "-fPIC"]
    built = subprocess.run(
        [compiler, *flags, *map(str, sources), "-o", tmp], capture_output=True, text=True, check=False
    )
    if built.returncode != 0:
        os.unlink(tmp)
        log.warning(
            "cannot build %s (%s): %s",
            ", ".join(source.name for source in sources),
            lost,
            built.stderr[-2000:],
        )
        return None
    os.replace(tmp, library)
    return library


def bfloat16_linears(model: Any) -> Iterator[tuple[Any, Any]]:
    """Every float32 ``Linear`` of ``model`` whose weights are all bfloat16 values, with them in
    bfloat16: the copy the layer keeps already (engines/bf16_scoring.py), else one made here. A
    layer holding a float32 value bfloat16 would round is left out."""
    import torch

    for module in model.modules():
        if not isinstance(module, torch.nn.Linear) or module.weight.dtype != torch.float32:
            continue
        copy = getattr(module, "weight_bf16", None)
        if copy is None:
            weight = module.weight.detach()
            copy = weight.to(torch.bfloat16)
            if not torch.equal(copy.float(), weight):
                continue
        yield module, copy


def pack(weight: Any) -> Any:
    """``weight`` (out x in, bfloat16) as the kernel reads it: blocks of ``BLOCK`` output rows,
    each in x ``BLOCK``, the last block padded with zero rows."""
    import torch

    out, width = weight.shape
    blocks = -(-out // BLOCK)
    padded = torch.zeros(blocks * BLOCK, width, dtype=torch.bfloat16)
    padded[:out] = weight.detach()
    # within a block, columns j and j + 16 side by side: one 32-bit lane holds both (bf16_linear.c)
    order = [j // 2 + (j % 2) * (BLOCK // 2) for j in range(BLOCK)]
    return padded.view(blocks, BLOCK, width)[:, order].transpose(1, 2).contiguous()


def packed_linear(x: Any, packed: Any, weight: Any, bias: Any, wide: Any = None) -> Any:
    """``torch.nn.functional.linear(x, weight, bias)``: by the kernel on ``packed`` for up to
    ``ROWS`` rows, by ``wide(x)`` (default torch's, on ``weight``, the float32 one) for more."""
    import torch

    width = x.shape[-1]
    rows = x.numel() // width if width else 0
    training = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)  # no gradient here
    wide_here = rows > ROWS and not getattr(_prefilling, "on", False)
    if wide_here or rows == 0 or x.dtype != torch.float32 or training:
        return wide(x) if wide is not None else torch.nn.functional.linear(x, weight, bias)
    flat = x.reshape(rows, width).contiguous()
    blocks = packed.shape[0]
    y = flat.new_empty(rows, blocks * BLOCK)
    kernel()(  # type: ignore[misc]  # pack_linears packs only where the kernel was built
        flat.data_ptr(), rows, width, packed.data_ptr(), blocks, y.data_ptr(), torch.get_num_threads()
    )
    out = weight.shape[0]
    if out != blocks * BLOCK:
        y = y[:, :out]
    if bias is not None:
        y = y + bias
    return y.reshape(*x.shape[:-1], out)


def pack_linears(model: Any) -> int:
    """Make every float32 ``Linear`` of ``model`` whose weights are all bfloat16 values run small
    inputs through the kernel; how many it packed (0 where the kernel cannot be built)."""
    if kernel() is None:
        return 0
    packed = 0
    for module, copy in bfloat16_linears(model):
        module.packed_bf16 = pack(copy)
        # wide inputs keep the forward the module had (a vocabulary head's slices, kept_logits.py)
        module.forward = functools.partial(_forward, module, module.forward)
        packed += 1
    return packed


def _forward(module: Any, wide: Any, x: Any) -> Any:
    return packed_linear(x, module.packed_bf16, module.weight, module.bias, wide)
