"""A Llama decoding step in a few tensor operations a layer, with the logits transformers computes.

A decoding step of the bundled SmolLM2 at 8 rows spent about a third of its time outside its
matrix products: transformers' module calls, a causal mask and rotary tables rebuilt every
step, and 211 products each through ``packed_linear``'s Python wrapper. This step runs the same
arithmetic, operation for operation (norms, rotary embedding, ``scaled_dot_product_attention``
with the arguments transformers' SDPA path passes, the residual sums), so its logits are
transformers' bit for bit (``tests/engines/test_llama_step.py``), while it

- multiplies each layer's query, key and value projections in one kernel call, and its gate and
  up projections in another (a packed block is a run of output columns, so the fused weights
  are the layers' packed blocks end to end, and each output is the same sum: 121 calls a step);
- calls the kernel directly (``packed_linear.kernel``);
- rotates queries and keys together and computes the rotary table once a step, not a layer.

It runs where it is exact: a ``LlamaForCausalLM`` with SDPA attention, the default rotary
embedding, no biases, SiLU, and every layer packed (float32 on a CPU, ``packed_linear.py``), and
only for up to ``packed_linear.ROWS`` rows (wider batches take torch's products there); elsewhere
the decoding loop calls the model's forward. The fused weights are the layers' own: each layer's
packed weight becomes a view into them, so no memory is added.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn import functional

from ptfactory.engines.packed_linear import BLOCK, ROWS, kernel

__all__ = ["LlamaStep", "llama_step"]


def llama_step(model: Any) -> LlamaStep | None:
    """The step for ``model`` (made once: kept on the model), or None where it would not compute
    transformers' logits exactly."""
    import transformers

    try:  # transformers' own choice between SDPA's GQA and folded query heads (5.x)
        from transformers.integrations.sdpa_attention import use_gqa_in_sdpa
    except ImportError:
        return None
    made = getattr(model, "ptfactory_llama_step", None)
    if made is not None:
        return made  # type: ignore[no-any-return]
    if not isinstance(model, transformers.LlamaForCausalLM) or kernel() is None:
        return None
    config, inner = model.config, model.model
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
    )
    if not exact:
        return None
    step = LlamaStep(model, use_gqa_in_sdpa)
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
    one new token a row, its keys and values appended to ``cache`` (a transformers cache whose
    layers take ``update``); ``attention_mask`` covers the cache and the new token, ``positions``
    is each row's new position (rows x 1)."""

    def __init__(self, model: Any, use_gqa_in_sdpa: Any) -> None:
        config, inner = model.config, model.model
        self.use_gqa_in_sdpa = use_gqa_in_sdpa
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.intermediate = config.intermediate_size
        self.grouped = self.heads != self.kv_heads  # query heads share key heads (GQA)
        self.vocabulary = model.lm_head.weight.shape[0]
        self.embeddings = inner.embed_tokens.weight
        self.inv_freq = inner.rotary_emb.inv_freq.float()
        self.attention_scaling = inner.rotary_emb.attention_scaling
        self.layers = []
        for layer in inner.layers:
            attention, mlp = layer.self_attn, layer.mlp
            self.layers.append(
                (
                    layer.input_layernorm,
                    _fused(attention.q_proj, attention.k_proj, attention.v_proj),
                    attention.o_proj.packed_bf16,
                    layer.post_attention_layernorm,
                    _fused(mlp.gate_proj, mlp.up_proj),
                    mlp.down_proj.packed_bf16,
                    attention.scaling,
                )
            )
        self.norm, self.head = inner.norm, model.lm_head.packed_bf16

    def applies(self, rows: int) -> bool:
        """Whether a step of ``rows`` rows runs here: transformers' products take wider ones, and
        any with gradients on, to torch's matrix product, whose sums run in another order."""
        return 0 < rows <= ROWS and not torch.is_grad_enabled()

    def __call__(
        self, cache: Any, tokens: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor
    ) -> torch.Tensor:
        rows, heads, kv_heads, dim = len(tokens), self.heads, self.kv_heads, self.head_dim
        threads = torch.get_num_threads()
        hidden = self.embeddings[tokens]
        # transformers' rotary table for these positions (LlamaRotaryEmbedding), for all layers
        freqs = positions.float() * self.inv_freq
        angles = torch.cat((freqs, freqs), dim=-1)
        cos = (angles.cos() * self.attention_scaling)[:, None]
        sin = (angles.sin() * self.attention_scaling)[:, None]
        # transformers drops the mask where no row is padded
        mask = None if bool(attention_mask.all()) else attention_mask.bool()[:, None, None, :]
        half = dim // 2
        for index, (norm_in, qkv_w, out_w, norm_mlp, gate_up_w, down_w, scale) in enumerate(self.layers):
            qkv = _product(_rms(norm_in, hidden), qkv_w, threads)
            qk = qkv[:, : (heads + kv_heads) * dim].view(rows, heads + kv_heads, dim)
            # rotate_half then the sums, as apply_rotary_pos_emb does (the same per element)
            qk = qk * cos + torch.cat((-qk[..., half:], qk[..., :half]), dim=-1) * sin
            query = qk[:, :heads, None]
            key = qk[:, heads:, None]
            value = qkv[:, (heads + kv_heads) * dim :].view(rows, kv_heads, 1, dim)
            key, value = cache.layers[index].update(key, value)
            # as transformers' SDPA path: SDPA repeats the key heads (enable_gqa) where
            # use_gqa_in_sdpa says so; otherwise a single query folds its heads onto them
            gqa = self.grouped and self.use_gqa_in_sdpa(mask, key, value)
            if self.grouped and not gqa:
                query = query.reshape(rows, kv_heads, heads // kv_heads, dim)
            attended = functional.scaled_dot_product_attention(
                query, key, value, attn_mask=mask, dropout_p=0.0, scale=scale, is_causal=False, enable_gqa=gqa
            )
            hidden = hidden + _product(attended.reshape(rows, heads * dim), out_w, threads)
            gate_up = _product(_rms(norm_mlp, hidden), gate_up_w, threads)
            gated = functional.silu(gate_up[:, : self.intermediate]) * gate_up[:, self.intermediate :]
            hidden = hidden + _product(gated, down_w, threads)
        logits = _product(_rms(self.norm, hidden), self.head, threads)
        return logits[:, : self.vocabulary]


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
