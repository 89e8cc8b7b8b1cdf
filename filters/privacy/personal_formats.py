"""Personal data in forms Presidio's recognizers miss, as small rules (each because a planted value
went through to a stored row):

- An IBAN written in lower case or in lower-case groups (``nl91abna0417164300``, ``de89 3704 0044
  ...``): Presidio's pattern wants capitals. Ours takes any case and keeps a match only when its
  mod-97 check passes (the IBAN standard's), trying shorter group runs when the last group is a
  following word.
- A US SSN as a bare run of 9 digits after its label (``ssn=536228471``): Presidio wants dashes or
  spaces. The number must be a valid one (no 000/666/9xx area, 00 group or 0000 serial).
- An e-mail address written to dodge harvesters: ``name[at]domain[dot]ru``, ``name (at) domain.de``,
  ``john dot smith at example dot com``. A bare `` at `` needs a `` dot `` too (``meet at noon``,
  ``look at google.com`` are prose), and the address must end in a known top-level domain.
- An e-mail address percent-encoded in a URL (``?email=jane.doe%40gmail.com``), and the number
  of a WhatsApp link (``wa.me/919845031276``): Presidio wants an ``@``, and a phone number a ``+``
  or a layout.
- A date of birth after its label (``DOB: 03/14/1987``, ``"date_of_birth": "1979-11-02"``): a date
  alone is no one's, a birth date is. Not "born on ...": that is how biographies of public figures
  open (four WritingBench documents). Type ``DATE_OF_BIRTH``, looked for whenever any personal
  data is (``privacy.entities`` lists Presidio's types).
- A national identity number after its label, a street address where an address stands
  (identifiers.py): types ``NATIONAL_ID`` and ``STREET_ADDRESS``, looked for as a birth date is.
- A US SSN in a CSV column named as one (``name,ssn,dept``), a bare 9 digits under its header.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ptfactory.filters.privacy.identifiers import national_ids, street_addresses

__all__ = ["extra_personal"]

_IBAN = re.compile(
    r"(?<![A-Za-z0-9])[A-Za-z]{2}\d{2}(?: ?[A-Za-z0-9]{4}){2,7}(?: ?[A-Za-z0-9]{1,3})?(?![A-Za-z0-9])"
)
_SSN = re.compile(
    r"(?i)\b(?:ssn|social[ _-]?security(?:[ _-]?(?:number|no\.?|num|#))?)\b[\"']?\s*(?:is|[:=#])?\s*[\"']?"
    r"(\d{3}[- ]?\d{2}[- ]?\d{4})\b"
)
_AT = r"(?:\s*(?:\[at\]|\(at\)|\{at\}|<at>)\s*|\s+at\s+)"
_DOT = r"(?:\s*(?:\[dot\]|\(dot\)|\{dot\}|<dot>)\s*|\s+dot\s+)"
_TLD = (
    r"com|org|net|edu|gov|mil|int|io|co|ai|app|dev|info|biz|me|us|uk|de|fr|ru|nl|it|es|pl|ch|at|be|se|"
    r"no|dk|fi|cz|pt|br|ca|au|in|jp|cn|kr|tr|ua|eu|ie|nz|za|mx|ar|gr|hu|ro|il|sg|hk|tw|xyz|online|email"
)
_OBFUSCATED_EMAIL = re.compile(
    rf"(?i)(?<![\w.+-])[a-z0-9][\w+-]*(?:(?:\.|{_DOT})[\w+-]+)*{_AT}"
    rf"[a-z0-9][\w-]*(?:(?:\.|{_DOT})[\w-]+)*?(?:\.|{_DOT})(?:{_TLD})(?![\w-])"
)
_DATE = (
    r"\d{1,2}[/.-]\d{1,2}[/.-](?:19|20)\d{2}|(?:19|20)\d{2}[/.-]\d{1,2}[/.-]\d{1,2}"
    r"|\d{1,2}\.? [A-Z][a-z]{2,8}\.? (?:19|20)\d{2}|[A-Z][a-z]{2,8}\.? \d{1,2},? (?:19|20)\d{2}"
)
_DOB = re.compile(
    r"(?i)\b(?:dob|d\.o\.b\.?|date[ _-]?of[ _-]?birth|birth[ _-]?date|birthdate|birthday|"
    r"geburtsdatum|date de naissance|fecha de nacimiento)\b[\"']?\s*[:=]?\s*[\"']?"
    rf"(?-i:({_DATE}))(?!\d)"
)


# an address percent-encoded in a URL's query (?email=jane.doe%40gmail.com): Presidio wants an @
_URL_EMAIL = re.compile(
    rf"(?i)(?<![\w.+%-])[a-z0-9][\w.+-]*%40[a-z0-9][\w-]*(?:\.[\w-]+)*\.(?:{_TLD})(?![\w-])"
)
# a WhatsApp link's number (wa.me/919845031276, api.whatsapp.com/send?phone=...): digits only, with
# the country code, which no phone recognizer takes without a + or a layout
_WHATSAPP = re.compile(r"(?i)\b(?:wa\.me/|whatsapp\.com/send/?\?phone=)\+?(\d{8,15})(?!\d)")


def _iban_valid(value: str) -> bool:
    code = value.replace(" ", "").upper()
    if not 15 <= len(code) <= 34:
        return False
    digits = "".join(str(int(c, 36)) for c in code[4:] + code[:4])
    return int(digits) % 97 == 1


def _ssn_valid(value: str) -> bool:
    digits = re.sub(r"\D", "", value)
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def _iban(text: str) -> Iterator[tuple[int, int]]:
    for m in _IBAN.finditer(text):
        value = m.group(0)
        if value.isupper() and " " not in value:
            continue  # Presidio's own form
        # the longest run of groups that passes the check: a following word can pass for a group
        ends = [i for i in range(len(value), 4, -1) if i == len(value) or value[i] == " "]
        for end in ends:
            if _iban_valid(value[:end]):
                yield m.start(), m.start() + end
                break


_SSN_HEADER = re.compile(r"(?i)[\"']?(?:ssn|social[ _-]?security(?:[ _-]?(?:number|no|num))?)[\"']?")


def _ssn_column(text: str) -> Iterator[tuple[int, int]]:
    """A CSV's (or TSV's) fields under an SSN header: ``name,ssn,dept`` then ``Grace Liu,403829176,...``."""
    offset, column = 0, None
    for line in text.splitlines(keepends=True):
        sep = "\t" if "\t" in line else ","
        fields = line.rstrip("\r\n").split(sep)
        named = [i for i, f in enumerate(fields) if len(fields) > 1 and _SSN_HEADER.fullmatch(f.strip())]
        if named:
            column = (len(fields), named[0])
        elif column and len(fields) == column[0]:
            at = offset + sum(len(f) + 1 for f in fields[: column[1]])
            value = fields[column[1]]
            if re.fullmatch(r"\d{3}[- ]?\d{2}[- ]?\d{4}", value) and _ssn_valid(value):
                yield at, at + len(value)
        else:
            column = None
        offset += len(line)


def extra_personal(text: str, entities: tuple[str, ...]) -> Iterator[tuple[str, int, int]]:
    """(type, start, end) of what the rules above find in ``text``, for the types in ``entities``."""
    if "IBAN_CODE" in entities:
        for start, end in _iban(text):
            yield "IBAN_CODE", start, end
    if "US_SSN" in entities:
        for m in _SSN.finditer(text):
            if _ssn_valid(m.group(1)):
                yield "US_SSN", m.start(1), m.end(1)
        yield from (("US_SSN", start, end) for start, end in _ssn_column(text))
    if "EMAIL_ADDRESS" in entities:
        for m in _OBFUSCATED_EMAIL.finditer(text):
            value = m.group(0)
            plain_at = not re.search(r"[\[({<]at[\])}>]", value, re.I)
            if plain_at and not re.search(_DOT, value, re.I):
                continue
            yield "EMAIL_ADDRESS", m.start(), m.end()
        for m in _URL_EMAIL.finditer(text):
            yield "EMAIL_ADDRESS", m.start(), m.end()
    if "PHONE_NUMBER" in entities:
        for m in _WHATSAPP.finditer(text):
            yield "PHONE_NUMBER", m.start(1), m.end(1)
    if entities:  # not one of the config's Presidio types: looked for wherever personal data is
        for m in _DOB.finditer(text):
            yield "DATE_OF_BIRTH", m.start(1), m.end(1)
        yield from (("NATIONAL_ID", start, end) for start, end in national_ids(text))
        yield from (("STREET_ADDRESS", start, end) for start, end in street_addresses(text))
