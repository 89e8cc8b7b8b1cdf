"""The one exception hierarchy of ptfactory.

::

    FactoryError                 base; ``exit_code`` is what ``ptf`` exits with
    ├── UserInputError           exit 2: the user can fix it by changing an input
    │   ├── ConfigError          factory.yaml: unknown key, bad value
    │   ├── SeedError            a seed file: bad JSON, bad UTF-8, missing field, ...
    │   └── DatasetRefError      NAME@VERSION that does not resolve
    ├── SchemaError              a table that does not fit storage.schema
    ├── ShardIntegrityError      a shard whose sha256/size differs from its manifest, or is missing
    ├── PublishError             a version could not be published
    ├── EngineError              an LLM backend failed or is not installed
    │   └── EngineRequestError   one request failed after its retries (recorded per sample)
    ├── SandboxError             the code sandbox could not run a job (not: the job failed)
    └── AnnotationError          Label Studio could not be reached or answered nonsense

Every message is a sentence that names the bad value and, where there is one, the fix.
"""

from __future__ import annotations

__all__ = [
    "AnnotationError",
    "ConfigError",
    "DatasetRefError",
    "EngineError",
    "EngineRequestError",
    "FactoryError",
    "PublishError",
    "SandboxError",
    "SchemaError",
    "SeedError",
    "ShardIntegrityError",
    "UserInputError",
]


class FactoryError(Exception):
    """Base of every error ptfactory raises on purpose."""

    exit_code = 1


class UserInputError(FactoryError):
    """An input the user gave is wrong; ``ptf`` exits 2."""

    exit_code = 2


class ConfigError(UserInputError):
    """factory.yaml (or an override) has an unknown key or a bad value."""


class SeedError(UserInputError):
    """A seed file cannot be read as seed tasks."""


class DatasetRefError(UserInputError):
    """A ``NAME@VERSION`` reference names no dataset, version or alias."""


class SchemaError(FactoryError):
    """A table does not match the sample record schema."""


class ShardIntegrityError(FactoryError):
    """A shard is missing or its bytes differ from what the manifest recorded."""


class PublishError(FactoryError):
    """A dataset version could not be published."""


class EngineError(FactoryError):
    """An LLM engine failed, timed out, or is not installed."""


class EngineRequestError(EngineError):
    """One request kept failing (5xx, 429, timeouts) after its retries: the sample records it."""


class SandboxError(FactoryError):
    """The sandbox could not run a job (engine down, image missing)."""


class AnnotationError(FactoryError):
    """Label Studio could not be reached or returned something unusable."""
