"""National identity numbers and street addresses, which Presidio finds only with an NLP model or
a per-country recognizer that ``privacy.entities`` does not list (each because a planted value went
through to a stored row):

- ``NATIONAL_ID``: a number after the label that says whose number it is: a UK National Insurance
  number, an Aadhaar, a German Steuer-ID, a Spanish DNI/NIE, a Canadian SIN, a Brazilian CPF, a
  Polish PESEL, a Dutch BSN, a Swedish personnummer, an Italian codice fiscale, a passport number
  (``Passport No. 533287901``: a label may end in a period) ... A bare number is no one's (an order number, an id): the label is what makes it personal, as
  a date of birth's does (personal_formats.py). Short labels are matched in capitals only
  (``SIN: ...``; ``sin = 0.8414`` is a sine), and the value needs six digits. A UK National
  Insurance number's own shape (``JK 48 29 17 B``) is taken without a label.
- ``STREET_ADDRESS``: a house number and a street (``1842 Maple Ridge Dr``, ``Lindenstraße 14``,
  ``27 rue des Lilas``) where an address stands: after a label (``Address:``, ``"street":``,
  ``ship to``, ``Anschrift``), or followed by a postal code within the same line (``..., Boulder,
  CO 80304``; ``Leeds LS12 1DR``; ``10969 Berlin``). A street name alone (``Baker Street``) is a
  place, not an address.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["national_ids", "street_addresses"]

_LONG_LABEL = (
    r"national insurance(?: number| no\.?)?|aadhaar(?: number| no\.?)?|steuer-?id(?:entifikationsnummer)?|"
    r"social insurance number|burgerservicenummer|personnummer|codice fiscale|tax file number|"
    r"n(?:uméro|°|o)\.? de sécurité sociale|passport(?: (?:number|no|#))?|reisepassnummer|"
    r"número de pasaporte|id(?:entity)? card (?:number|no\.?)|personalausweisnummer"
)
_SHORT_LABEL = r"NINO|NI number|SIN|DNI|NIE|NIF|NIR|BSN|CPF|RUT|TFN|CURP|PESEL|UIDAI"
_NATIONAL_ID = re.compile(
    rf"(?:(?i:\b(?:{_LONG_LABEL}))|\b(?:{_SHORT_LABEL}))(?:\b|(?<=#))\.?[\"']?\s*(?:is\s+|[:=#]\s*)?[\"']?"
    r"([A-Z0-9](?:[A-Z0-9]|[ ./-](?=[A-Z0-9])){6,20})(?![\w-])"
)

# a UK National Insurance number's own shape needs no label: two letters (not D, F, I, Q, U, V; not
# the unused BG, GB, KN, NK, NT, TN, ZZ), six digits, a suffix A-D (QQ 12 34 56 C is HMRC's example)
_NINO = re.compile(
    r"\b(?!BG|GB|KN|NK|NT|TN|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b"
)

_SUFFIX = (
    r"Street|St|Avenue|Ave|Road|Rd|Drive|Dr|Lane|Ln|Boulevard|Blvd|Court|Ct|Way|Place|Pl|Terrace|Ter|"
    r"Parkway|Pkwy|Highway|Hwy|Square|Sq|Close|Crescent|Cres|Circle|Cir|Trail|Row|Gardens|Mews"
)
_STREET = (
    # 1842 Maple Ridge Dr; 27 Wellington Road; 455 Kearny St
    rf"\d{{1,6}}[A-Za-z]?,?\s+(?:[A-Z][\w'.-]*\s+){{1,4}}(?:{_SUFFIX})\b\.?"
    # Lindenstraße 14, Hauptstr. 3a, Kerkweg 12
    r"|[A-ZÄÖÜ][\wäöüß-]*(?:straße|strasse|str\.|weg|gasse|allee|platz|damm|ufer|laan|straat|gracht|vej|gatan|gata)"
    r"\s+\d{1,4}[a-z]?\b"
    # 27 rue des Lilas; Calle Mayor 12; Via Roma 45
    r"|\d{1,4},?\s+(?:rue|avenue|boulevard|bd|allée|chemin|impasse|place)\s+(?:[\w'’-]+\s+){0,3}[\w'’-]+"
    r"|(?:Calle|Avenida|Avda\.|Via|Viale|Corso|Rua|Carrer|Paseo)\s+(?:[A-Z\d][\w'’.-]*\s+){1,4}\d{1,4}\b"
)
_ADDRESS_LABEL = re.compile(
    r"(?i)(?:\b(?:(?:home|street|postal|mailing|shipping|billing|delivery|residential|my)\s+)?address|\bstreet|"
    r"\banschrift|\badresse|\bdirección|\bindirizzo|\bendereço|\bship(?:ped)?(?:\s+it)?\s+to|\bdeliver(?:ed|y)?"
    r"(?:\s+it)?\s+to|\bsend(?:\s+it)?\s+to|\blives?\s+at|\bwohnt\s+in|\bhabite\s+au)[\"']?\s*[:=]?\s*[\"']?$"
)
# a postal code after the street, on its line: US ZIP after a state, UK postcode, a 4-5 digit code
# before a town (not a year: "stores opened in 2021 March"), a 5-digit one after it
_POSTCODE = re.compile(
    r"[^\n]{0,60}?(?:\b[A-Z]{2}\s+\d{5}(?:-\d{4})?\b|\b[A-Z]{1,2}\d[A-Z\d]?\s+\d[A-Z]{2}\b|"
    r"\b(?!(?:19|20)\d\d\b)\d{4,5}\s+[A-ZÄÖÜ][\wäöüß-]+|\b[A-ZÄÖÜ][\wäöüß-]+,?\s+\d{5}\b)"
)
_STREET_RE = re.compile(_STREET)


def national_ids(text: str) -> Iterator[tuple[int, int]]:
    for m in _NATIONAL_ID.finditer(text):
        if sum(c.isdigit() for c in m.group(1)) >= 6:
            yield m.span(1)
    yield from (m.span() for m in _NINO.finditer(text))


def street_addresses(text: str) -> Iterator[tuple[int, int]]:
    for m in _STREET_RE.finditer(text):
        labelled = _ADDRESS_LABEL.search(text[max(0, m.start() - 40) : m.start()])
        masked = re.search(r"\bX{2,}\b", m.group(0))  # a template's 123 XX Road
        if (labelled or _POSTCODE.match(text, m.end())) and not masked:
            yield m.span()
