"""Text → normalised words → hashed word n-grams: the one definition both the index and the check use.

Normalisation (scheme :data:`SCHEME`), applied to a whole batch at once (numpy over the Arrow bytes for
ASCII, polars' Unicode regexes for the pieces holding other characters: :func:`normalized_words`):

1. Unicode NFKD, then combining marks dropped: accents and diacritics go (``é`` → ``e``), and
   compatibility forms unfold (``ﬁ`` → ``fi``, ``½`` → ``1⁄2``).
2. Lower case.
3. Each Han, Hiragana or Katakana character is a word of its own (those scripts put no spaces
   between words; one character a word keeps a 13-gram a phrase, not a paragraph).
4. Everything that is not a letter or a digit separates words: punctuation, symbols, ``_``,
   whitespace of any kind. ``has_close_elements(x)`` is ``has close elements x``; reflowed text,
   changed quotes or markdown emphasis do not hide a copy.
5. Digits are kept, not folded. Folding every digit run to one token (as datatrove does) makes
   templated items collide: GSM8K-style problems share their sentence frames ("She sells the
   remainder at the farmers' market daily for $N per ...") and differ only in their numbers, so a
   freshly written problem on a familiar frame would be flagged as a test item. With digits kept,
   a copy with its numbers changed is a different problem, which is what it is for a verifier.

Word hashes are XXH3-64 (polars-hash, stable across machines and versions); an n-gram's hash folds
its words' hashes in order (multiply-xor) and finishes with splitmix64. A run of ``k < n`` words
(a whole short item) hashes the same way with ``k`` mixed in, so it never equals an n-gram's hash
by construction of the scheme rather than by luck.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from ptfactory.filters.dedup.minhash import word_hashes

__all__ = ["SCHEME", "Grams", "gram_hashes", "normalized_words"]

# Change this name whenever a hash below would change for the same text: a cached or shipped index
# built under another scheme is rebuilt or refused, never silently compared.
SCHEME = "decont/1:nfkd-nomarks-lower-cjkchars-alnum-words;xxh3_64;fnv-splitmix"

_PRIME = np.uint64(0x100000001B3)
_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}"
_WORD = rf"[{_CJK}]|[[\p{{L}}\p{{N}}]&&[^{_CJK}]]+"
_BYTES = np.arange(256, dtype=np.uint8)
_LOWER = np.where((_BYTES >= 65) & (_BYTES <= 90), _BYTES + np.uint8(32), _BYTES).astype(np.uint8)
# bytes that belong to a piece: ASCII letters and digits, and every byte of a non-ASCII character
_PIECE = ((_LOWER >= 97) & (_LOWER <= 122)) | ((_BYTES >= 48) & (_BYTES <= 57)) | (_BYTES >= 128)
_SEED = 0


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: a uniform 64-bit value from a structured one."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def unmix(x: np.ndarray) -> np.ndarray:
    """The inverse of :func:`_mix` (splitmix64's finalizer is a bijection): compare a few stored hashes
    with raw folds instead of mixing every fold of a batch."""
    x = np.asarray(x, dtype=np.uint64)
    x = x ^ (x >> np.uint64(31)) ^ (x >> np.uint64(62))
    x = x * np.uint64(0x319642B2D24D8EC3)
    x = x ^ (x >> np.uint64(27)) ^ (x >> np.uint64(54))
    x = x * np.uint64(0x96DE1B173F119089)
    return x ^ (x >> np.uint64(30)) ^ (x >> np.uint64(60))


def normalized_words(texts: Sequence[str | None] | pa.Array) -> tuple[pl.Series, np.ndarray]:
    """Every normalised word of every text, flattened in order, and the number of words per text.

    numpy splits the Arrow bytes of all rows at ASCII bytes that are not ``[A-Za-z0-9]``: those are
    separators under every rule below, so each piece can be normalised alone. A piece of ASCII letters
    and digits only is lower-cased in place (NFKD, mark removal and the CJK rule are identities on it);
    a piece holding other characters (``naïve``, ``it’s``, ``ﬁle``, a Chinese sentence) goes through
    polars' Unicode regexes. Both give the same words as running the rules over whole texts; generated
    English text is nearly all ASCII, so little goes the slow way."""
    array = texts if isinstance(texts, pa.Array | pa.ChunkedArray) else pa.array(list(texts), pa.string())
    array = pc.fill_null(array, "")
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks else pa.array([], pa.string())
    array = pc.cast(array, pa.large_string())
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[array.offset : array.offset + len(array) + 1]
    data = array.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    raw = raw[offsets[0] : offsets[-1]]
    offsets = offsets - offsets[0]
    if not len(raw):
        return pl.Series("t", [], dtype=pl.String), np.zeros(len(array), dtype=np.int64)
    low = _LOWER[raw]  # A-Z only: every byte of a UTF-8 sequence is >= 128
    piece = _PIECE[raw]
    # a CJK unified ideograph (U+4E00..U+9FFF, 3 bytes led by E4 B8+ .. E9) is a word of its own and
    # unchanged by NFKD and case: it is cut out here, not sent to the regexes
    nxt = np.concatenate((raw[1:], [0])).astype(np.uint8)
    lead = ((raw == 0xE4) & (nxt >= 0xB8)) | ((raw >= 0xE5) & (raw <= 0xE9))
    after_han = np.zeros(len(raw) + 1, dtype=bool)
    after_han[np.flatnonzero(lead) + 3] = True
    row_start = np.zeros(len(raw) + 1, dtype=bool)  # a piece never runs from one row into the next
    row_start[offsets] = True
    cut = row_start | after_han
    cut[: len(raw)] |= lead
    before = np.concatenate(([False], piece[:-1])) & ~cut[:-1]
    after = np.concatenate((piece[1:], [False])) & ~cut[1:]
    starts = np.flatnonzero(piece & ~before)
    ends = np.flatnonzero(piece & ~after) + 1
    sizes = ends - starts
    bounds = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    pieces = pl.Series(
        "t",
        pa.Array.from_buffers(
            pa.large_string(), len(starts), [None, pa.py_buffer(bounds), pa.py_buffer(low[piece].tobytes())]
        ),
        dtype=pl.String,
    )
    high = np.concatenate(([0], np.cumsum(raw >= 128, dtype=np.int32)))
    # pieces holding a non-ASCII character other than a cut-out ideograph go to the regexes
    other = (high[ends] > high[starts]) & ~lead[starts]
    first_piece = np.searchsorted(starts, offsets, side="left")  # each row's pieces, in order
    if not other.any():
        return pieces, np.diff(first_piece).astype(np.int64)
    words, counts = _unicode_words(pieces.filter(pl.Series(other)).to_arrow())
    per_piece = np.ones(len(starts), dtype=np.int64)
    per_piece[other] = counts
    first = np.cumsum(per_piece) - per_piece  # where each piece's words begin in the output
    source = np.empty(int(per_piece.sum()), dtype=np.int64)
    source[first[~other]] = np.flatnonzero(~other)
    within = np.arange(len(words), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    source[np.repeat(first[other], counts) + within] = len(starts) + np.arange(len(words), dtype=np.int64)
    flat = pl.concat([pieces, words]).gather(pl.Series(source))
    done = np.concatenate(([0], np.cumsum(per_piece)))
    return flat, (done[first_piece[1:]] - done[first_piece[:-1]]).astype(np.int64)


def _unicode_words(array: pa.Array) -> tuple[pl.Series, np.ndarray]:
    """:func:`normalized_words` by polars' Unicode regexes (any script): a Han, Hiragana or Katakana
    character alone, else a run of other letters and digits, is a word (one regex pass)."""
    array = pc.utf8_normalize(array, "NFKD")
    tokens = (
        pl.Series("t", array, dtype=pl.String)
        .str.replace_all(r"\p{M}+", "")
        .str.to_lowercase()
        .str.extract_all(_WORD)
    )
    per_text = tokens.list.len().fill_null(0).to_numpy().astype(np.int64)
    return tokens.explode().drop_nulls(), per_text


class Grams:
    """The word hashes of a batch of texts, and their k-grams on demand.

    ``words`` and ``lengths`` come from :func:`normalized_words`; ``starts[i]`` is where text ``i``'s
    words begin in the flat arrays. :meth:`of_length` gives (text index, start position, hash) of
    every run of ``k`` consecutive words that stays inside one text.
    """

    def __init__(self, texts: Sequence[str | None] | pa.Array) -> None:
        self.words, self.lengths = normalized_words(texts)
        self.hashes = word_hashes(self.words, _SEED) if len(self.words) else np.zeros(0, np.uint64)
        self.starts = np.concatenate(([0], np.cumsum(self.lengths)[:-1])).astype(np.int64)
        self.doc = np.repeat(np.arange(len(self.lengths), dtype=np.int64), self.lengths)

    def of_length(self, k: int, *, whole: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(text, flat start, hash) of each k-word run; ``whole=True``: hashes in the short-item
        namespace (k mixed in), for matching items shorter than n words."""
        return self.runs([(k, whole)])[0]

    def folds(self, lengths: Sequence[int]) -> dict[int, np.ndarray]:
        """k -> the unmixed fold of the k-word run starting at each flat position ``0 .. len - k``
        (runs that cross into the next text included: filter with :meth:`inside`). One pass over the
        words serves every k: the fold's state after k words is the k-run's."""
        total = len(self.hashes)
        usable = sorted({k for k in lengths if 0 < k <= total})
        found: dict[int, np.ndarray] = {}
        if not usable:
            return found
        acc = self.hashes[: total - usable[0] + 1].copy()
        for j in range(usable[-1]):  # after step j, acc[i] folds words i .. i+j
            if j:
                live = min(total - j, len(acc))
                acc[:live] *= _PRIME
                acc[:live] ^= self.hashes[j : j + live]
            if j + 1 in usable:
                found[j + 1] = acc[: total - j].copy() if j + 1 != usable[-1] else acc[: total - j]
        return found

    def inside(self, positions: np.ndarray, k: int) -> np.ndarray:
        """Which k-runs starting at ``positions`` stay inside one text."""
        return self.doc[positions] == self.doc[positions + k - 1]

    def runs(self, wanted: Sequence[tuple[int, bool]]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """:meth:`of_length` for several ``(k, whole)`` at once, from one :meth:`folds` pass."""
        folds = self.folds([k for k, _ in wanted])
        out = []
        for k, whole in wanted:
            if k not in folds:
                out.append((np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint64)))
                continue
            positions = np.flatnonzero(self.inside(np.arange(len(folds[k]), dtype=np.int64), k))
            acc = folds[k][positions]
            if whole:
                acc = acc ^ (np.uint64(k) << np.uint64(56))
            out.append((self.doc[positions], positions, _mix(acc)))
        return out

    def whole_texts(self) -> tuple[np.ndarray, np.ndarray]:
        """(text, hash) of each non-empty text as one run of all its words, in the short namespace."""
        docs, hashes = [], []
        for k in np.unique(self.lengths[self.lengths > 0]).tolist():
            members = np.flatnonzero(self.lengths == k)
            acc = self.hashes[self.starts[members]].copy()
            for j in range(1, k):
                acc = (acc * _PRIME) ^ self.hashes[self.starts[members] + j]
            docs.append(members)
            hashes.append(_mix(acc ^ (np.uint64(k) << np.uint64(56))))
        if not docs:
            return np.zeros(0, np.int64), np.zeros(0, np.uint64)
        return np.concatenate(docs), np.concatenate(hashes)

    def text_of(self, start: int, k: int) -> str:
        """The normalised words ``start .. start+k`` joined by spaces (a hit's evidence)."""
        return " ".join(self.words.slice(start, k).to_list())


def gram_hashes(texts: Sequence[str | None], n: int) -> np.ndarray:
    """Every n-gram hash of ``texts`` (texts shorter than n contribute none): for tests and benches."""
    return Grams(texts).of_length(n)[2]
