"""``python -m ptfactory.pipelines`` is ``ptf``."""

from ptfactory.pipelines.cli import main

main()
