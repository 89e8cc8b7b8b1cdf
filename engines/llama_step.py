"""A Llama decoding step in one C call (``llama_layer.c``) around the packed products.

A decoding step of the bundled SmolLM2 at 8 rows spent about a third of its time outside its
matrix products: transformers' module calls, a causal mask and rotary tables rebuilt every
step, and 211 products each through ``packed_linear``'s Python wrapper. A first version of this
step ran the same torch operations, bit for bit, and still spent 10 ms a step (of 22, on the
2-core EPYC) in about 20 small torch calls a layer (norms, rotary, SDPA, SiLU, residual sums).
Now a step is one call into ``llama_layer.c``, which runs those as loops over a few thousand
floats and calls the kernel for the products (22 ms a step became 13 at 8 rows); it

- multiplies each layer's query, key and value projections in one kernel call, and its gate and
  up projections in another (a packed block is a run of output columns, so the fused weights
  are the layers' packed blocks end to end, and each output is the same sum);
- computes the rotary table once a step, not a layer;
- writes each layer's new keys and values into the room of the decoding loop's cache
  (``kv_cache.py``: ``room``, ``advance``), then attends over its buffers in place.

The arithmetic is transformers' (RMSNorm, rotate_half, softmax attention, SiLU, residual sums),
in float32; only the order of the norms' and attention's sums differs, as it differs between
torch's kernels: logits within 1e-4 of transformers' forward, the same greedy and sampled tokens
(``tests/engines/test_llama_step.py``; ``bench/engines.py`` checks greedy outputs against plain
float32).

It runs where that holds: a ``LlamaForCausalLM`` with SDPA attention, the default rotary
embedding, no biases, SiLU, and every layer packed (float32 on a CPU, ``packed_linear.py``), and
only for up to ``packed_linear.ROWS`` rows (wider batches take torch's products there); elsewhere
the decoding loop calls the model's forward. The fused weights are the layers' own: each layer's
packed weight becomes a view into them, so no memory is added.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import torch

from ptfactory.engines.packed_linear import BLOCK, ROWS, SOURCE, kernel, load

__all__ = ["LlamaStep", "llama_step"]

LAYER_SOURCE = Path(__file__).with_name("llama_layer.c")


def llama_step(model: Any) -> LlamaStep | None:
    """The step for ``model`` (made once: kept on the model), or None where it would not compute
    what transformers' forward computes (or the kernels cannot be built)."""
    import transformers

    made = getattr(model, "ptfactory_llama_step", None)
    if made is not None:
        return made  # type: ignore[no-any-return]
    if not isinstance(model, transformers.LlamaForCausalLM) or kernel() is None:
        return None
    config, inner = model.config, model.model
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads or config.num_attention_heads
    exact = (
        config._attn_implementation == "sdpa"
        and getattr(inner.rotary_emb, "rope_type", None) == "default"
        and not config.attention_bias
        and not config.mlp_bias
        and config.hidden_act == "silu"
        and len(inner.layers) == config.num_hidden_layers  # transformers runs that many
        and all(hasattr(m, "packed_bf16") for m in _linears(model))
        # fused projections and the residual stream need whole blocks (the head is sliced)
        and all(m.out_features % BLOCK == 0 for m in _linears(model)[1:])
        and heads % kv_heads == 0
    )
    library = (
        load(SOURCE, LAYER_SOURCE, lost="Llama models decode through transformers' forward")
        if exact
        else None
    )
    if library is None:
        return None
    layers = library.llama_layers
    layers.restype = None
    int64, pointer = ctypes.c_int64, ctypes.c_void_p
    layers.argtypes = [int64, int64, pointer, pointer, int64, int64, int64, int64, int64, pointer]
    layers.argtypes += [pointer, pointer, pointer, pointer, int64, pointer, ctypes.c_int]
    step = LlamaStep(model, layers)
    # kept on the model: a second call would fuse the fused views again, into a second copy
    model.ptfactory_llama_step = step  # type: ignore[assignment]
    return step


def _linears(model: Any) -> list[Any]:
    parts = [("q_proj", "k_proj", "v_proj", "o_proj"), ("gate_proj", "up_proj", "down_proj")]
    found = [model.lm_head]
    for layer in model.model.layers:
        found += [getattr(layer.self_attn, name) for name in parts[0]]
        found += [getattr(layer.mlp, name) for name in parts[1]]
    return found


def _fused(*modules: Any) -> torch.Tensor:
    """The modules' packed weights end to end; each module's becomes a view into them."""
    fused = torch.cat([m.packed_bf16 for m in modules])
    start = 0
    for module in modules:
        blocks = module.packed_bf16.shape[0]
        module.packed_bf16 = fused[start : start + blocks]
        start += blocks
    return fused


class LlamaStep:
    """``step(cache, tokens, attention_mask, positions)``: the next logits (rows x vocabulary) for
    one new token a row, its keys and values appended to ``cache`` (engines/kv_cache.py's
    ``GrowingCache``, whose layers give their buffers' room); ``attention_mask`` covers the cache
    and the new token, ``positions`` is each row's new position (rows x 1)."""

    def __init__(self, model: Any, layers: Any) -> None:
        config, inner = model.config, model.model
        self.layers_call = layers
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.width, self.intermediate = config.hidden_size, config.intermediate_size
        self.vocabulary = model.lm_head.weight.shape[0]
        self.embeddings = inner.embed_tokens.weight
        self.inv_freq = inner.rotary_emb.inv_freq.float()
        self.attention_scaling = inner.rotary_emb.attention_scaling
        self.kept: list[torch.Tensor] = []  # what the layer table points into, held here
        table = (_LayerTable * len(inner.layers))()
        for entry, layer in zip(table, inner.layers, strict=True):
            attention, mlp = layer.self_attn, layer.mlp
            norm_in, norm_mlp = layer.input_layernorm, layer.post_attention_layernorm
            weights = {
                "norm_in": norm_in.weight.detach().float().contiguous(),
                "norm_mlp": norm_mlp.weight.detach().float().contiguous(),
                "qkv": _fused(attention.q_proj, attention.k_proj, attention.v_proj),
                "out": attention.o_proj.packed_bf16,
                "gate_up": _fused(mlp.gate_proj, mlp.up_proj),
                "down": mlp.down_proj.packed_bf16,
            }
            for name, tensor in weights.items():
                setattr(entry, name, tensor.data_ptr())
                if name not in ("norm_in", "norm_mlp"):
                    setattr(entry, f"{name}_blocks", tensor.shape[0])
                self.kept.append(tensor)
            entry.eps_in, entry.eps_mlp = norm_in.variance_epsilon, norm_mlp.variance_epsilon
            entry.scale = attention.scaling
        self.table = table
        self.qkv_columns = table[0].qkv_blocks * BLOCK
        self.norm, self.head = inner.norm, model.lm_head.packed_bf16

    def applies(self, rows: int) -> bool:
        """Whether a step of ``rows`` rows runs here: wider ones, and any with gradients on, take
        transformers' forward (torch's matrix products)."""
        return 0 < rows <= ROWS and not torch.is_grad_enabled()

    def __call__(
        self, cache: Any, tokens: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor
    ) -> torch.Tensor:
        rows, count = len(tokens), len(self.table)
        threads = torch.get_num_threads()
        hidden = self.embeddings[tokens].float().contiguous()  # a copy: the layers update it in place
        # transformers' rotary table for these positions (LlamaRotaryEmbedding), for all layers
        freqs = positions.float() * self.inv_freq
        angles = torch.cat((freqs, freqs), dim=-1)
        cos = (angles.cos() * self.attention_scaling).contiguous()
        sin = (angles.sin() * self.attention_scaling).contiguous()
        # 1 where a row attends; none where no row is padded
        mask = None if bool(attention_mask.all()) else attention_mask.to(torch.uint8).contiguous()
        rooms = [layer.room(1) for layer in cache.layers[:count]]
        _check(rooms, count, (rows, self.kv_heads, self.head_dim), attention_mask)
        length = rooms[0][2]
        self.layers_call(
            rows, self.width, hidden.data_ptr(), ctypes.addressof(self.table), count,
            self.heads, self.kv_heads, self.head_dim, self.intermediate, cos.data_ptr(), sin.data_ptr(),
            (ctypes.c_void_p * count)(*(keys.data_ptr() for keys, _, _ in rooms)),
            (ctypes.c_void_p * count)(*(values.data_ptr() for _, values, _ in rooms)),
            (ctypes.c_int64 * count)(*(keys.shape[2] for keys, _, _ in rooms)),
            length, None if mask is None else mask.data_ptr(), threads,
        )  # fmt: skip
        for layer in cache.layers[:count]:
            layer.advance(1)
        logits = _product(_rms(self.norm, hidden), self.head, threads)
        return logits[:, : self.vocabulary]


def _check(
    rooms: list[tuple[torch.Tensor, torch.Tensor, int]],
    count: int,
    shape: tuple[int, int, int],
    attention_mask: torch.Tensor,
) -> None:
    """What llama_layer.c takes on trust (it writes into the buffers, reads the mask by offset)."""
    lengths = {length for _, _, length in rooms}
    if len(rooms) != count or len(lengths) != 1:
        raise ValueError(f"the cache has {len(rooms)} of {count} layers, holding {sorted(lengths)} positions")
    for keys, values, _ in rooms:
        for buffer in (keys, values):
            rows, heads, _, dim = buffer.shape
            if (rows, heads, dim) != shape or buffer.dtype != torch.float32 or not buffer.is_contiguous():
                raise ValueError(
                    f"a cache buffer of {tuple(buffer.shape)} {buffer.dtype}, not {shape} float32"
                )
    if tuple(attention_mask.shape) != (shape[0], lengths.pop() + 1):
        raise ValueError(f"the attention mask is {tuple(attention_mask.shape)}, not rows x (cache + 1)")


class _LayerTable(ctypes.Structure):
    """llama_layer.c's ``llama_layer_t``: a layer's weights (addresses) and constants."""

    _fields_ = [
        *((name, ctypes.c_void_p) for name in ("norm_in", "norm_mlp", "qkv", "out", "gate_up", "down")),
        *((f"{name}_blocks", ctypes.c_int64) for name in ("qkv", "out", "gate_up", "down")),
        *((name, ctypes.c_float) for name in ("eps_in", "eps_mlp", "scale")),
    ]


def _rms(norm: Any, x: torch.Tensor) -> torch.Tensor:
    """LlamaRMSNorm's arithmetic, in its order."""
    variance = x.pow(2).mean(-1, keepdim=True)
    normed: torch.Tensor = norm.weight * (x * torch.rsqrt(variance + norm.variance_epsilon))
    return normed


def _product(x: torch.Tensor, packed: torch.Tensor, threads: int) -> torch.Tensor:
    """``x`` (rows x in, float32) times a packed weight: rows x its padded output columns."""
    x = x.contiguous()
    rows, width = x.shape
    blocks = packed.shape[0]
    y = x.new_empty(rows, blocks * BLOCK)
    kernel()(x.data_ptr(), rows, width, packed.data_ptr(), blocks, y.data_ptr(), threads)  # type: ignore[misc]
    return y
