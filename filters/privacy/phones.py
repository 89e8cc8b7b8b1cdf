"""Phone numbers: the layouts detect.py adds to Presidio's ``phonenumbers`` recognizer, and the check
every phone finding passes (:func:`plausible_phone`). Each rule because of a measured miss or false
redaction (detect.py's notes list them):

- ``phonenumbers`` accepts only numbers valid in its metadata; :data:`LAYOUTS` adds North-American,
  ``+``-international and trunk-``0`` layouts, and a nine-digit national layout (``612 34 78 90``,
  ``512 345 678``: Spain, Poland, Portugal, Czechia ...), which is a phone number only right after
  a phone word (``Teléfono:``, ``tel.``, ``mobile``), being otherwise as likely a count or an id.
- A bare run of 10-12 digits is a phone number only after a phone word; otherwise a number needs a
  format mark and 10 digits (8 after a ``+``), and no `` - `` between spaces (arithmetic).
- An opening parenthesis that nothing closes is the call's around the number
  (``default_rng(1234567890)``), no format mark; a decimal (``0.479425538604203``) is no number
  to call.
"""

from __future__ import annotations

import re

from ptfactory.filters.privacy.addresses import in_dotted_quad

__all__ = ["LAYOUTS", "plausible_phone"]

_PHONE_MARK = re.compile(r"[+\s().-]")
_EXT = r"(?:\s?(?:x|ext\.?)\s?\d{1,6})?"
# a layout inside a longer chain of numbers and operators (6000-600-150-1200-2000 in a GSM8K
# calculator note) is arithmetic: the edges refuse word characters, dots, colons and operators
_EDGE_L, _EDGE_R = r"(?<![\w.:=*/+-])", r"(?![\w.:=*/+-])"
_NANP = (
    _EDGE_L
    + r"(?:\+?1[-. ]?|001[-. ]?)?(?:\(\d{3}\)\s?|\d{3}[-. ]|\d{3}(?=\d{7}))\d{3}[-. ]?\d{4}"
    + _EXT
    + _EDGE_R
)
_INTL = _EDGE_L + r"\+\d{1,3}[-. ]?\(?\d{1,4}\)?(?:[-. ]?\d{2,4}){2,4}" + _EXT + _EDGE_R
_TRUNK = _EDGE_L + r"0\d{2,5}[ /-]\d{3,8}" + _EDGE_R  # national layouts with a trunk 0 (030 1234567)
_NINE = _EDGE_L + r"[1-9]\d{2}(?:[ .-]\d{2,3}){2,3}" + _EDGE_R  # 612 34 78 90, 512 345 678
LAYOUTS = (("NANP", _NANP), ("international", _INTL), ("trunk", _TRUNK), ("nine digits", _NINE))

_PHONE_WORDS = re.compile(
    r"(?i)\b(phone|call|tel|mobile|cell|contact|reach|text|sms|fax|whatsapp|dial|number)\w*"
)
# what must stand right before a nine-digit number: a word that says phone, in a few languages
_PHONE_LABEL = re.compile(
    r"(?i)(?:\b(?:phone|tel|mobile|cell|fax|whatsapp|sms|call|contact)\w*|tel[ée]fono|telefone|"
    r"t[ée]l[ée]phone|t[ée]l\.|telefon\w*|telem[óo]vel|handy|m[óo]vil|celular|contato|contacto|kontakt)"
    r"(?:\s+(?:de|del|da|do|me|at|on|is|es|est|ist|to|number|no\.?|nr\.?|contacto|contato|m[óo]vil|mobile))"
    r"{0,2}[\s.:#()/-]*$"
)


def plausible_phone(value: str, text: str, start: int, end: int) -> bool:
    """False for a phone recognizer's match that is most likely something else (the notes above)."""
    value = value.strip()
    before = text[max(0, start - 48) : start]
    if value.startswith("(") and ")" not in value:  # the call's parenthesis: default_rng(1234567890)
        value = value[1:]
    # a version after a product's slash (Chrome/124.0.6367.207) or a book number after ISBN
    if (before.endswith("/") and "." in value) or re.search(r"(?i)\bISBN(?:-1[03])?:?\s*$", before):
        return False
    if in_dotted_quad(text, start, end) or re.fullmatch(r"\d+\.\d+", value):  # a network, a decimal
        return False
    if value.isdigit():  # a bare run: a phone number only where the words before say so
        return 10 <= len(value) <= 12 and bool(_PHONE_WORDS.search(before))
    digits = sum(c.isdigit() for c in value)
    groups = len(re.findall(r"\d+", value))
    marked = value.startswith(("+", "(", "0")) or groups >= 3
    fewest = 8 if value.startswith("+") else 9 if digits == 9 and _PHONE_LABEL.search(before) else 10
    return marked and bool(_PHONE_MARK.search(value)) and " - " not in value and digits >= fewest
