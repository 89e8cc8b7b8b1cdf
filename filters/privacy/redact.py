"""Redaction: each found value replaced by a typed placeholder, the same value by the same
placeholder everywhere in one record.

A record (a sample row, a seed task) is redacted as a whole: the first e-mail address found
becomes ``<EMAIL_ADDRESS>``, a second, different one ``<EMAIL_ADDRESS_2>``, and every occurrence
of a value that stands as a whole token, in any field, gets its placeholder (also where a
recognizer missed it, e.g. a number inside a test's string literal); inside another word it stays
(a password ``test`` leaves ``pytest`` alone). So a code row's tests still refer to what its
solution returns. What is recorded is the type and count of what was replaced, never the value.

Code rows: a personal-data value that the row's ``tests`` use is test data (a Luhn task asserting
on card numbers, an e-mail validator's examples) and stays as it is, so execution still passes;
secrets are redacted even there. A code row whose solution or tests no longer parse as Python
after redaction cannot be kept consistent: :func:`redact_record` says so and the stage routes it
to review (redacted all the same).
"""

from __future__ import annotations

import ast
import re
import string
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from ptfactory.filters.privacy.config import PrivacyConfig
from ptfactory.filters.privacy.detect import Finding, find

__all__ = ["Redactor", "parses", "redact_record", "redact_text"]


_WORD = frozenset(string.ascii_letters + string.digits + "_")


def _whole_token(text: str, start: int, end: int) -> bool:
    """``text[start:end]`` is not part of a longer word: a word character at its edge is not
    continued by another one outside it (a value that begins or ends with ``/`` or ``=`` may touch
    anything on that side)."""
    before = start > 0 and text[start - 1] in _WORD and text[start] in _WORD
    after = end < len(text) and text[end] in _WORD and text[end - 1] in _WORD
    return not (before or after)


class Redactor:
    """Placeholders for one record: value → ``<TYPE>`` / ``<TYPE_k>``, and what was replaced."""

    def __init__(self, config: PrivacyConfig | None = None, keep: Iterable[str] = ()) -> None:
        self.config = config or PrivacyConfig()
        self.entities = tuple(self.config.entities)
        self.placeholders: dict[str, str] = {}
        self.kinds: dict[str, str] = {}
        self.counts: Counter[str] = Counter()
        self.keep = set(keep)
        self.secret: dict[str, bool] = {}
        self.spans: dict[str, set[tuple[int, int]]] = {}  # text -> where its findings stand

    def findings(self, text: str) -> list[Finding]:
        return find(text, self.entities, self.config.secrets)

    def _placeholder(self, finding: Finding) -> str:
        if finding.value not in self.placeholders:
            seen = sum(1 for k in self.kinds.values() if k == finding.kind)
            self.placeholders[finding.value] = (
                f"<{finding.kind}>" if not seen else f"<{finding.kind}_{seen + 1}>"
            )
            self.kinds[finding.value] = finding.kind
            self.secret[finding.value] = finding.secret
        return self.placeholders[finding.value]

    def learn(self, text: str) -> None:
        """Find values in ``text`` and give each a placeholder (without replacing yet)."""
        for finding in self.findings(text):
            if finding.secret or finding.value not in self.keep:
                self._placeholder(finding)
                self.spans.setdefault(text, set()).add((finding.start, finding.end))

    def apply(self, text: str, *, count: bool = True) -> str:
        """Every known value replaced in ``text``: where a recognizer found it, and wherever else it
        stands as a whole token. Not inside another word: a value found once (a password ``test``)
        would otherwise take the middle out of every ``pytest`` of the row. Longer values first, so a
        value inside another stays whole."""
        if not self.placeholders or not text:
            return text
        found = self.spans.get(text, set())
        taken: list[tuple[int, int, str]] = []
        for value in sorted(self.placeholders, key=len, reverse=True):
            at = text.find(value)
            while at >= 0:
                end = at + len(value)
                whole = (at, end) in found or _whole_token(text, at, end)
                if whole and not any(at < e and s < end for s, e, _ in taken):
                    taken.append((at, end, value))
                at = text.find(value, at + 1)
        if not taken:
            return text
        parts, last = [], 0
        for start, end, value in sorted(taken):
            parts += [text[last:start], self.placeholders[value]]
            last = end
            if count:
                self.counts[self.kinds[value]] += 1
        return "".join(parts) + text[last:]

    def apply_number(self, text: str) -> str:
        """A number written as digits (``4158675309``): the placeholder of a found value with the
        same digits (``415 867 5309`` in the text), else as :meth:`apply` makes it."""
        for value, placeholder in self.placeholders.items():
            if not self.secret.get(value) and len(text) >= 7 and re.sub(r"\D", "", value) == text:
                self.counts[self.kinds[value]] += 1
                return placeholder
        return self.apply(text)

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


def _walk(
    value: Any,
    visit: Callable[[str], str],
    skip: frozenset[str],
    key: str | None = None,
    number: Callable[[str], str] | None = None,
) -> Any:
    if isinstance(value, str):
        return value if key in skip else visit(value)
    if isinstance(value, dict):
        return {k: _walk(v, visit, skip, k, number) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, visit, skip, key, number) for v in value]
    if number and isinstance(value, int | float) and not isinstance(value, bool) and key not in skip:
        # a seed's numeric answer (4158675309) that is a value found in its text: the placeholder,
        # as text (a seed's answer may be text); any other number stays a number
        text = str(value)
        cleaned = number(text)
        return value if cleaned == text else cleaned
    return value


def _strings(value: Any, skip: frozenset[str], key: str | None = None) -> list[str]:
    out: list[str] = []
    _walk(value, lambda s: out.append(s) or s, skip, key)  # type: ignore[func-returns-value]
    return out


def parses(code: str | None) -> bool:
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
    numbers: bool = False,
) -> tuple[dict[str, Any], dict[str, int], bool]:
    """(the record redacted, counts per type, consistent). Every string in it is read except the
    keys in ``skip`` (ids, enums). ``code``: for a code row, its ``{"tests": ..., "solution": ...}``
    texts: values its tests use are test data (``code_test_data``), and ``consistent`` is False when
    a code text that parsed before no longer parses. ``numbers``: a number equal to a value found
    in the record's text is replaced too (a seed file's ``"answer": 4158675309``; a table's numeric
    columns keep their type, so :mod:`.samples` leaves numbers alone)."""
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
    cleaned = _walk(record, redactor.apply, skip, number=redactor.apply_number if numbers else None)
    consistent = True
    if code and redactor.placeholders:
        for source in code.values():
            if parses(source) and not parses(redactor.apply(source or "", count=False)):
                consistent = False
    return cleaned, dict(redactor.counts), consistent
