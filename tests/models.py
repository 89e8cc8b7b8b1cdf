"""Models for tests: a tiny random Llama built in a second (a folder with a tokenizer), small random
causal LMs of other families in memory, and the bundled SmolLM2, converted once."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# Shared across test runs (gitignored): converting the bundled GGUF takes ~1 min, once.
TEST_STATE = REPO / ".ptf" / "test-state"
CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "write a python function that returns the sum of two numbers",
    "data factory sample shard version judge sandbox dedup prompt answer",
    "what is the capital of france? paris is the capital of france.",
] * 50


def build_tiny_model(path: Path) -> Path:
    """A 2-layer Llama with a 1k-token BPE and a ChatML template (~0.6 MB; random weights)."""
    if (path / "config.json").exists():
        return path
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.train_from_iterator(
        _CORPUS,
        trainers.BpeTrainer(
            vocab_size=1000, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    from tokenizers import decoders

    tokenizer.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token="<|im_start|>",
    )
    fast.chat_template = CHATML
    config = LlamaConfig(
        vocab_size=fast.vocab_size + 3,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        bos_token_id=fast.bos_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    fast.save_pretrained(tmp)
    os.replace(tmp, path)
    return path


def bundled_model() -> Path:
    from ptfactory.engines.bundled import bundled_model_dir

    return bundled_model_dir(TEST_STATE)


_RANDOM_KINDS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM"),
    "granite": ("GraniteConfig", "GraniteForCausalLM"),  # its forward scales the head's logits
}


def random_causal_lm(kind: str, vocab_size: int, **overrides: Any) -> Any:
    """A small random-weight causal LM (``llama``, ``gemma3`` or ``granite``) in eval mode, for
    tests of what a forward pass does, not what trained weights say; ``overrides`` go to its config."""
    import transformers

    config_name, model_name = _RANDOM_KINDS[kind]
    settings = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        **overrides,
    }
    config = getattr(transformers, config_name)(vocab_size=vocab_size, **settings)
    return getattr(transformers, model_name)(config).eval()
