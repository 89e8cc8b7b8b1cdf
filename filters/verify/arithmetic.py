"""The arithmetic a worked solution writes out, checked: "180 * 40 = 7400" is a slip (it is 7200).

A reference written as a worked solution ("180 * 40 = 7400 trees. #### 7400") is only as good as
its working. Where an equation between plain numbers does not hold, the reference contradicts
itself, and no reply should pass or fail against it: the answer verifier abstains
(``reference_inconsistent``) and difficulty drops the seed as ``reference_wrong``
(:mod:`~ptfactory.filters.difficulty.answers`).

Only equations whose left side is numbers and operators (``+ - * / × ÷``, `` x `` between spaces,
brackets) and whose right side is one number are read; a percent, a unit or a variable on either
side leaves the equation out. A result rounded to the decimals it shows ("10 / 3 = 3.33"), or
rounded down or up to a whole number ("7 / 2 = 3 full boxes"), holds. GSM8K's calculator notes
(``<<180*40=7200>>``) are equations too. On GSM8K's 1,319 test solutions: see
tests/filters/verify/test_arithmetic.py for the count it finds.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from fractions import Fraction

__all__ = ["slips"]

_NUMBER = r"\$?\d{1,3}(?:,\d{3})+(?:\.\d+)?|\$?\d+(?:\.\d+)?|\$?\.\d+"
_OPERATOR = r"(?:[-+*/×÷]|\sx\s)"
_EQUATION = re.compile(
    rf"((?:\(\s*)*(?:{_NUMBER})(?:\s*\)*\s*{_OPERATOR}\s*(?:\(\s*)*(?:{_NUMBER}))+(?:\s*\))*)"
    rf"\s*=\s*(-?(?:{_NUMBER}))(?![\d,]*\d|\.\d|\s*[-+%/*×÷^(]|\s+x\s|\s\d)"
)
# what may not stand right before an equation's left side: a letter or digit joined to it, an
# operator, an exponent, a bracket or a number before a space (the equation is part of a longer
# one, of algebra, of a mixed number or of an implicit product: "10^2 + 1 = 101", "3 1/2 - 2 =",
# "(1/2) 278 + 11 = 150"); a right side that goes on ("= 8 + 18", "= 1 1/2", "= $409 500") too
_BEFORE = re.compile(r"(?:[\w.^%]|[=+*/×÷)-]\s*|\sx\s*|\d\s+)$")
_BINARY: dict[type, Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _value(node: ast.expr) -> Fraction:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return Fraction(str(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_value(node.left), _value(node.right))
    raise ValueError("not arithmetic")


def _plain(text: str) -> str:
    return (
        re.sub(r"\s+x\s+", " * ", text).replace("×", "*").replace("÷", "/").replace("$", "").replace(",", "")
    )


def _holds(left: Fraction, right: str) -> bool:
    value = Fraction(right)
    if left == value:
        return True
    decimals = len(right.split(".", 1)[1]) if "." in right else 0
    if abs(left - value) <= Fraction(1, 2 * 10**decimals):  # rounded to what it shows
        return True
    # a whole number of boxes, trips or people: rounded down or up
    return decimals == 0 and value in (math.floor(left), math.ceil(left))


def slips(text: str) -> list[str]:
    """The equations of ``text`` between plain numbers that do not hold, each as "180 * 40 =
    7400 (is 7200)"; empty when every one holds (or there is none)."""
    found = []
    for match in _EQUATION.finditer(text):
        if _BEFORE.search(text[: match.start()]):
            continue
        left, right = match.group(1), _plain(match.group(2))
        try:
            value = _value(ast.parse(_plain(left), mode="eval").body)
        except (SyntaxError, ValueError, ZeroDivisionError):
            continue
        if not _holds(value, right):
            shown = f"{float(value):.6g}" if value.denominator != 1 else str(value.numerator)
            found.append(f"{' '.join(match.group(0).split())} (is {shown})")
    return found
