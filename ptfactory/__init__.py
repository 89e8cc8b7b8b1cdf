"""ptfactory: a post-training data factory.

The distribution's shared core: version, error hierarchy, and where the factory
keeps its state (``PTF_HOME``). Stage code lives in the top-level packages
(``storage``, ``filters``, ``engines``, ...); see docs/architecture.md.
"""

from ptfactory.version import __version__, code_version

__all__ = ["__version__", "code_version"]
