"""Decontamination: rows that share an n-gram with an evaluation-set item are dropped, naming the item.

=============  ===================================================================================
module         holds
=============  ===================================================================================
``normalize``  the normalisation and hashing both sides use (:data:`SCHEME`; digits not folded)
``sources``    the built-in evaluation sets (which package, which licence) and users' files
``index``      :class:`NgramIndex`: hashed n-grams → items, saved as a checked ``.npz``
``cache``      :func:`load_index`: the index a config asks for, built once, cached by content key
``check``      :func:`check_texts` and :func:`decontaminate_samples` (the stage over a batch)
``files``      ``ptf decontaminate``: a table file, or a published version, against the index
``config``     :class:`DecontaminationConfig`, the ``decontamination:`` section of factory.yaml
``build``      ``python -m ptfactory.filters.decontamination.build``: the shipped ``builtin.npz``
=============  ===================================================================================

The stage between dedup and execution::

    index = load_index(config, local_state_dir(), project_root())   # cached by key: cheap after once
    table, stats = decontaminate_samples(table, index)               # drop / contaminated + evidence
    index.empty_benchmarks()  # the check fails on any name here; index.summary() for the manifest
"""

from ptfactory.filters.decontamination.cache import build_count, build_index, index_key, load_index
from ptfactory.filters.decontamination.check import (
    STAGE,
    DecontaminationStats,
    Hit,
    check_texts,
    decontaminate_samples,
    sample_texts,
)
from ptfactory.filters.decontamination.config import BenchmarkFile, DecontaminationConfig
from ptfactory.filters.decontamination.files import decontaminate_file, recheck_version
from ptfactory.filters.decontamination.index import NgramIndex
from ptfactory.filters.decontamination.normalize import SCHEME
from ptfactory.filters.decontamination.sources import BUILTINS, LICENCES, Item

__all__ = [
    "BUILTINS",
    "LICENCES",
    "SCHEME",
    "STAGE",
    "BenchmarkFile",
    "DecontaminationConfig",
    "DecontaminationStats",
    "Hit",
    "Item",
    "NgramIndex",
    "build_count",
    "build_index",
    "check_texts",
    "decontaminate_file",
    "decontaminate_samples",
    "index_key",
    "load_index",
    "recheck_version",
    "sample_texts",
]
