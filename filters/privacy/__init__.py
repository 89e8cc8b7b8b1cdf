"""Personal data and secrets: found offline, replaced by typed placeholders, recorded by type and count.

==============  ==================================================================================
module          holds
==============  ==================================================================================
``config``      :class:`PrivacyConfig`, the ``privacy:`` section of factory.yaml
``detect``      :func:`find`: Presidio (no NLP model) and detect-secrets, with the rules on top
``redact``      :func:`redact_text` and the per-record :class:`Redactor` (same value, same placeholder)
``samples``     :func:`redact_table`, :func:`clean_samples` (the stage), :func:`redact_seed`
``seedfiles``   :func:`redact_seed_files`: seed files redacted before they are staged, counts beside
==============  ==================================================================================

Person names are not found: that needs a NER model, and none can be had offline.
"""

from ptfactory.filters.privacy.config import ENTITIES, PrivacyConfig
from ptfactory.filters.privacy.detect import TEST_CARDS, Finding, find
from ptfactory.filters.privacy.redact import Redactor, redact_record, redact_text
from ptfactory.filters.privacy.samples import (
    STAGE,
    PrivacyStats,
    clean_samples,
    record_redactions,
    redact_seed,
    redact_table,
)
from ptfactory.filters.privacy.seedfiles import SIDECAR, read_sidecar, redact_seed_files

__all__ = [
    "ENTITIES",
    "SIDECAR",
    "STAGE",
    "TEST_CARDS",
    "Finding",
    "PrivacyConfig",
    "PrivacyStats",
    "Redactor",
    "clean_samples",
    "find",
    "read_sidecar",
    "record_redactions",
    "redact_record",
    "redact_seed",
    "redact_seed_files",
    "redact_table",
    "redact_text",
]
