"""Redaction: each found value replaced by a typed placeholder, the same value by the same
placeholder everywhere in one record.

A record (a sample row, a seed task) is redacted as a whole: the first e-mail address found
becomes ``<EMAIL_ADDRESS>``, a second, different one ``<EMAIL_ADDRESS_2>``, and every occurrence
of a value, in any field, gets its placeholder (also where a recognizer missed it, e.g. a number
inside a test's string literal). So a code row's tests still refer to what its solution
returns. What is recorded is the type and count of what was replaced, never the value.

Code rows: a personal-data value that the row's ``tests`` use is test data (a Luhn task asserting
on card numbers, an e-mail validator's examples) and stays as it is, so execution still passes;
secrets are redacted even there. A code row whose solution or tests no longer parse as Python
after redaction cannot be kept consistent: :func:`redact_record` says so and the stage routes it
to review (redacted all the same).
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from ptfactory.filters.privacy.config import PrivacyConfig
from ptfactory.filters.privacy.detect import Finding, find

__all__ = ["Redactor", "redact_text"]


class Redactor:
    """Placeholders for one record: value → ``<TYPE>`` / ``<TYPE_k>``, and what was replaced."""

    def __init__(self, config: PrivacyConfig | None = None, keep: Iterable[str] = ()) -> None:
        self.config = config or PrivacyConfig()
        self.entities = tuple(self.config.entities)
        self.placeholders: dict[str, str] = {}
        self.kinds: dict[str, str] = {}
        self.counts: Counter[str] = Counter()
        self.keep = set(keep)

    def findings(self, text: str) -> list[Finding]:
        return find(text, self.entities, self.config.secrets)

    def _placeholder(self, finding: Finding) -> str:
        if finding.value not in self.placeholders:
            seen = sum(1 for k in self.kinds.values() if k == finding.kind)
            self.placeholders[finding.value] = (
                f"<{finding.kind}>" if not seen else f"<{finding.kind}_{seen + 1}>"
            )
            self.kinds[finding.value] = finding.kind
        return self.placeholders[finding.value]

    def learn(self, text: str) -> None:
        """Find values in ``text`` and give each a placeholder (without replacing yet)."""
        for finding in self.findings(text):
            if finding.secret or finding.value not in self.keep:
                self._placeholder(finding)

    def apply(self, text: str, *, count: bool = True) -> str:
        """Every known value replaced in ``text`` (longest first, so a value inside another stays whole)."""
        if not self.placeholders or not text:
            return text
        for value in sorted(self.placeholders, key=len, reverse=True):
            hits = text.count(value)
            if hits:
                text = text.replace(value, self.placeholders[value])
                if count:
                    self.counts[self.kinds[value]] += hits
        return text

    def redact(self, text: str) -> str:
        self.learn(text)
        return self.apply(text)


def redact_text(text: str, config: PrivacyConfig | None = None) -> tuple[str, dict[str, int]]:
    """``text`` with personal data and secrets replaced by typed placeholders, and how many of each
    type were replaced (what the engine layer calls on a request before it leaves the machine)."""
    if not text:
        return text, {}
    redactor = Redactor(config)
    cleaned = redactor.redact(text)
    return cleaned, dict(redactor.counts)


def _walk(value: Any, visit: Callable[[str], str], skip: frozenset[str], key: str | None = None) -> Any:
    if isinstance(value, str):
        return value if key in skip else visit(value)
    if isinstance(value, dict):
        return {k: _walk(v, visit, skip, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, visit, skip, key) for v in value]
    return value


def _strings(value: Any, skip: frozenset[str], key: str | None = None) -> list[str]:
    out: list[str] = []
    _walk(value, lambda s: out.append(s) or s, skip, key)  # type: ignore[func-returns-value]
    return out


def _parses(code: str | None) -> bool:
    if not code:
        return True
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def redact_record(
    record: dict[str, Any],
    config: PrivacyConfig | None = None,
    *,
    skip: frozenset[str],
    code: dict[str, str | None] | None = None,
) -> tuple[dict[str, Any], dict[str, int], bool]:
    """(the record redacted, counts per type, consistent). Every string in it is read except the
    keys in ``skip`` (ids, enums). ``code``: for a code row, its ``{"tests": ..., "solution": ...}``
    texts: values its tests use are test data (``code_test_data``), and ``consistent`` is False when
    a code text that parsed before no longer parses."""
    config = config or PrivacyConfig()
    keep: set[str] = set()
    if code and config.code_test_data and code.get("tests"):
        tests = code["tests"] or ""
        keep = {f.value for f in find(tests, tuple(config.entities), secrets=False)}
        # a value the tests hold literally, though no recognizer fires there (quoted, split by code)
        keep |= {
            f.value
            for s in _strings(record, skip)
            for f in find(s, tuple(config.entities), False)
            if f.value in tests
        }
    redactor = Redactor(config, keep)
    for text in _strings(record, skip):
        redactor.learn(text)
    cleaned = _walk(record, redactor.apply, skip)
    consistent = True
    if code and redactor.placeholders:
        for source in code.values():
            if _parses(source) and not _parses(redactor.apply(source or "", count=False)):
                consistent = False
    return cleaned, dict(redactor.counts), consistent
