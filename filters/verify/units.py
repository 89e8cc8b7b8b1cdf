"""Units of measure a reference states ("20 minutes", "45 km", "3.5 kg"): a reply's answer in
another unit of the same kind is compared after conversion.

The extractor strips units ("20 days" reads 20), as the issue's contract says, so "20 seconds"
passed against "20 minutes" and "1,200 seconds" failed against it. Where the reference names a unit
of a known kind (time, length, mass, volume) and the reply writes its answer with a unit of that
kind, the answer verifier compares the reply's value converted into the reference's unit:
"20 seconds" fails against "20 minutes" (reason ``wrong_unit``), "1,200 seconds" passes. A reply
whose answer carries no unit, or a unit of another kind ("20 apples"), is compared as a number, as
before. Money ("$5", "500 cents") is left to the number rules.
"""

from __future__ import annotations

import re
from fractions import Fraction

from ptfactory.filters.verify.spans import NUMBER, READ_AS, normalize_answer, number_value

__all__ = ["Unit", "reference_unit", "reply_unit"]

Unit = tuple[str, str, Fraction]  # (kind, name, size in the kind's base unit)

_SIZES: dict[str, dict[tuple[str, ...], Fraction]] = {
    "time": {
        ("s", "sec", "secs", "second", "seconds"): Fraction(1),
        ("min", "mins", "minute", "minutes"): Fraction(60),
        ("h", "hr", "hrs", "hour", "hours"): Fraction(3600),
        ("day", "days"): Fraction(86400),
        ("week", "weeks"): Fraction(604800),
    },
    "length": {
        ("mm", "millimeter", "millimeters", "millimetre", "millimetres"): Fraction(1, 1000),
        ("cm", "centimeter", "centimeters", "centimetre", "centimetres"): Fraction(1, 100),
        ("m", "meter", "meters", "metre", "metres"): Fraction(1),
        ("km", "kilometer", "kilometers", "kilometre", "kilometres"): Fraction(1000),
        ("in", "inch", "inches"): Fraction(254, 10000),
        ("ft", "foot", "feet"): Fraction(3048, 10000),
        ("yd", "yard", "yards"): Fraction(9144, 10000),
        ("mi", "mile", "miles"): Fraction(1609344, 1000),
    },
    "mass": {
        ("mg", "milligram", "milligrams"): Fraction(1, 1000),
        ("g", "gram", "grams"): Fraction(1),
        ("kg", "kilogram", "kilograms"): Fraction(1000),
        ("oz", "ounce", "ounces"): Fraction(28349523125, 10**9),
        ("lb", "lbs", "pound", "pounds"): Fraction(45359237, 10**5),
    },
    "volume": {
        ("ml", "milliliter", "milliliters", "millilitre", "millilitres"): Fraction(1, 1000),
        ("l", "liter", "liters", "litre", "litres"): Fraction(1),
        ("gal", "gallon", "gallons"): Fraction(3785411784, 10**9),
    },
}
_UNITS: dict[str, Unit] = {
    name: (kind, names[-1], size)
    for kind, table in _SIZES.items()
    for names, size in table.items()
    for name in names
}
# a unit written right after a number: "20 minutes", "45km", "3.5 kg."
_AFTER = re.compile(r"\s*([A-Za-z]+)\b")
# a unit that is also an English word ("5 in the box"): a unit in a reference, not in a reply
_AMBIGUOUS = {"in"}


def _unit_at(text: str, end: int, strict: bool) -> Unit | None:
    match = _AFTER.match(text, end)
    if match is None:
        return None
    word = match.group(1)
    if strict and word.lower() in _AMBIGUOUS:
        return None
    return _UNITS.get(word if word in ("m", "g", "l") else word.lower())


def reference_unit(answer: str) -> tuple[Fraction, Unit] | None:
    """The reference's value and unit when it is one number and a known unit ("20 minutes", "45
    km"), else None."""
    text = answer.translate(READ_AS).strip().rstrip(".")
    numbers = list(NUMBER.finditer(text))
    if len(numbers) != 1 or text[: numbers[0].start()].strip(" $"):
        return None
    value = number_value(normalize_answer(numbers[0].group(0)) or "")
    unit = _unit_at(text, numbers[0].end(), strict=False)
    if value is None or unit is None or text[numbers[0].end() :].strip().count(" ") > 0:
        return None
    return value, unit


def reply_unit(reply: str, value: Fraction, kind: str) -> tuple[Fraction, Unit] | None:
    """The unit of ``kind`` the reply writes after the last number equal to its answer ``value``
    ("... so it takes 20 seconds."), else None (no unit there, or one of another kind)."""
    text = reply.translate(READ_AS)
    for number in reversed(list(NUMBER.finditer(text))):
        if number_value(normalize_answer(number.group(0)) or "") != value:
            continue
        unit = _unit_at(text, number.end(), strict=True)
        return (value, unit) if unit is not None and unit[0] == kind else None
    return None
