"""What a row says: its conversation as text, its prompt and its response."""

from __future__ import annotations

import pyarrow as pa

__all__ = ["row_texts"]


def row_texts(table: pa.Table) -> pa.Array:
    """Each row's conversation as one text (turns joined by newlines): what dedup and embeddings read."""
    texts = [
        "\n".join(m["content"] for m in messages or []) for messages in table.column("messages").to_pylist()
    ]
    return pa.array(texts, pa.string())
