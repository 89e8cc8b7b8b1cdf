"""``privacy:`` in factory.yaml: which personal data and secrets are looked for, and what happens then."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ptfactory.section import Section

__all__ = ["ENTITIES", "PrivacyConfig"]

# Presidio entity types found without an NLP model (patterns + checksums). Person names, places and
# organisations need a NER model (spaCy, transformers), and none can be had offline: not detected.
ENTITIES = ("EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "IP_ADDRESS", "IBAN_CODE", "US_SSN")


class PrivacyConfig(Section):
    """Personal data and secrets in seeds, generations and references are replaced by typed
    placeholders (``<EMAIL_ADDRESS>``); the row is then kept, dropped or sent to review."""

    enabled: bool = Field(default=True, description="look for personal data and secrets")
    action: Literal["redact", "drop", "review"] = Field(
        default="redact",
        description="a row with findings: redact (keep the cleaned row), drop it, or route it to review; "
        "the stored row is redacted in every case",
    )
    entities: list[str] = Field(
        default_factory=lambda: list(ENTITIES),
        description=f"personal-data types to find (Presidio, no NLP model): {', '.join(ENTITIES)}",
    )
    secrets: bool = Field(
        default=True,
        description="find credentials and API keys (detect-secrets' pattern plugins, keyword assignments, "
        "PEM private keys; not its entropy plugins, which fire on hashes and base64 in code)",
    )
    code_test_data: bool = Field(
        default=True,
        description="in a code row, a personal-data value that its tests use is test data (a Luhn task's "
        "card numbers), kept so the tests still run; secrets are redacted regardless",
    )

    @field_validator("entities")
    @classmethod
    def _known(cls, names: list[str]) -> list[str]:
        unknown = [n for n in names if n not in ENTITIES]
        if unknown:
            raise ValueError(f"unknown entity type(s) {unknown}; choose from {', '.join(ENTITIES)}")
        return names
