"""``python -m ptfactory`` is ``ptf`` (handy under ``accelerate launch -m``)."""

from ptfactory.pipelines.cli import main

main()
