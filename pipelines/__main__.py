"""``python -m pipelines`` is ``ptf``."""

from pipelines.cli import main

main()
