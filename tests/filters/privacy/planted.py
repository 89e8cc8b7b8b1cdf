"""What the held-out privacy tests share: values drawn per case (a rule that knows one string fails)
and the two outcomes, every planted value gone or the text kept as it is."""

from __future__ import annotations

import random
import string
import zlib

from ptfactory.filters.privacy import redact_text

ALNUM = string.ascii_letters + string.digits


def rng(name: str) -> random.Random:
    """A generator seeded by the case's name: the same values on every run."""
    return random.Random(zlib.crc32(name.encode()))


def drawn(r: random.Random, n: int, alphabet: str = ALNUM) -> str:
    """``n`` characters of ``alphabet`` holding a digit and a letter."""
    while True:
        value = "".join(r.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
            return value


def a_password(r: random.Random, length: int) -> str:
    """A password of ``length`` + 3 characters: letters and digits, a symbol and two digits."""
    body = drawn(r, length)
    return body[:4] + r.choice("!#%&*+?") + str(r.randint(10, 99)) + body[4:]


def gone(text: str, *values: str) -> str:
    """``text`` redacted, asserting something was and none of ``values`` is left."""
    out, counts = redact_text(text)
    assert counts, text
    for value in values:
        assert value not in out, out
    return out


def kept(text: str) -> None:
    assert redact_text(text) == (text, {})
