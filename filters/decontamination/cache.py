"""The index a configuration asks for: built once, then read from the cache by its key.

The built-in part comes from the index shipped in this package (``builtin.npz``, hashed 13-grams:
no benchmark text ships) when ``ngram`` is 13, else from the benchmarks' source packages. Users'
files are hashed on each build. The cache key covers everything that changes the index (scheme,
n, the shipped file's sha256, the chosen built-ins, each user file's name, fields and sha256), so
an edited benchmark file rebuilds and an unchanged one is read back: the cost of a batch is its
own rows, not the benchmarks again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ptfactory.errors import ConfigError
from ptfactory.filters.decontamination.config import DecontaminationConfig
from ptfactory.filters.decontamination.index import NgramIndex
from ptfactory.filters.decontamination.normalize import SCHEME
from ptfactory.filters.decontamination.sources import LICENCES, builtin_items, file_items

__all__ = ["SHIPPED", "build_count", "build_index", "index_key", "load_index"]

SHIPPED = Path(__file__).with_name("builtin.npz")
_BUILDS = [0]


def build_count() -> int:
    """How many indexes this process has built (not read from a cache): what the cache test counts."""
    return _BUILDS[0]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _resolve(path: Path, root: Path | None) -> Path:
    return path if path.is_absolute() or root is None else root / path


def index_key(config: DecontaminationConfig, root: Path | None = None) -> str:
    """The cache key of the index ``config`` describes (user paths resolved against ``root``)."""
    files = []
    for bench in config.benchmarks:
        path = _resolve(bench.path, root)
        if not path.is_file():
            raise ConfigError(
                f"decontamination.benchmarks: {bench.name!r} names {path}, which does not exist; "
                "fix the path or remove the entry"
            )
        files.append({"name": bench.name, "fields": bench.fields, "sha256": _sha256(path)})
    shipped = _sha256(SHIPPED) if SHIPPED.is_file() else None
    key = {
        "scheme": SCHEME,
        "n": config.ngram,
        "builtins": config.builtins,
        "shipped": shipped,
        "files": files,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def _builtin_part(config: DecontaminationConfig) -> NgramIndex:
    if SHIPPED.is_file():
        shipped = NgramIndex.load(SHIPPED)
        if shipped.n == config.ngram and set(config.builtins) <= set(shipped.counts):
            return shipped.select(config.builtins)
    items = [item for name in config.builtins for item in builtin_items(name)]
    described = [{"name": n, "source": "builtin", "licence": LICENCES[n]} for n in config.builtins]
    return NgramIndex.build(items, config.ngram, described)


def build_index(config: DecontaminationConfig, root: Path | None = None) -> NgramIndex:
    """The index ``config`` describes, built now (see :func:`load_index` for the cached path)."""
    _BUILDS[0] += 1
    index = _builtin_part(config)
    for bench in config.benchmarks:
        path = _resolve(bench.path, root)
        items = file_items(path, bench.fields, bench.name)
        described = [
            {"name": bench.name, "source": str(path), "licence": "user file", "fields": bench.fields}
        ]
        index = index.merge(NgramIndex.build(items, config.ngram, described))
    return index


def load_index(config: DecontaminationConfig, cache_dir: Path, root: Path | None = None) -> NgramIndex:
    """The index for ``config``: read from ``cache_dir/decontamination/<key>.npz`` when an earlier
    call built it, else built and cached (atomically). A corrupt cache file is rebuilt."""
    path = cache_dir / "decontamination" / f"index-{index_key(config, root)[:32]}.npz"
    if path.is_file():
        try:
            return NgramIndex.load(path)
        except ConfigError:
            path.unlink(missing_ok=True)
    index = build_index(config, root)
    index.save(path)
    return index
