"""Numbers that lie, in the execution harness (stdlib only; Python 3.11; never imported on the host).

:mod:`ptfactory.filters.execution.programs` sends this file's source into the sandbox with the
harness's other files, as one ``program.py``: the names here are that program's globals.

Tests of floats rarely use ``==``: they write ``abs(f(x) - want) < 1e-6``, ``math.fabs(...)``,
``round(f(x) - want, 6) == 0`` or ``assertAlmostEqual``. An answer whose ``__sub__`` (or
``__abs__``) says 0 passes all of them without equalling anything (``_lying``). Each subtraction
of the tests that such a check reads (an operand of a comparison, the argument of ``abs``,
``fabs`` or ``round``) is rewritten to ``_ptf_sub``, which notes a lying operand in ``_fakes``
(the run is not graded); ``==`` and the ``TestCase`` assertions check their operands too
(``harness_honest.py``), and so do the returns of the solution's functions.
"""

from __future__ import annotations

import _ast

TYPE_CHECKING = False
if TYPE_CHECKING:  # the sandbox runs the files as one program: these names are its globals there
    from collections.abc import Callable
    from typing import Any

    from ptfactory.filters.execution.harness import _bool, _locate, _type
    from ptfactory.filters.execution.harness_honest import _CONTAINER_IDS, _PLAIN_IDS, _fakes, _holds

_READ_BY = frozenset(("abs", "fabs", "round"))  # calls whose argument a tolerance check reads


def _lying(value: Any) -> bool:
    """``value`` (no builtin) says what no number does: it is as far from 12345.678 as from
    24691.356 (a ``__sub__`` or ``__abs__`` that answers 0, so ``abs(f(x) - want) < 1e-6`` holds
    for any ``want``), or both below and not below one (an ``__lt__`` that always says yes).
    Operations it lacks (a ``TypeError``) say nothing."""
    if id(_type(value)) in _PLAIN_IDS or id(_type(value)) in _CONTAINER_IDS:
        return False
    probes: tuple[Callable[[], bool], ...] = (
        lambda: _holds(abs(value - 12345.678), abs(value - 24691.356)),
        lambda: _bool(value < 12345.678) and _bool(value >= 12345.678),
        lambda: _bool(value > 12345.678) and _bool(value <= 12345.678),
    )
    for probe in probes:
        try:
            if probe():
                return True
        except BaseException:  # no such operation: nothing said
            pass
    return False


def _ptf_sub(left: Any, right: Any) -> object:
    """``left - right`` in the tests; a lying operand (``_lying``) noted in ``_fakes``."""
    for value in (left, right):
        if id(_type(value)) not in _PLAIN_IDS and _lying(value):
            _fakes.append(_type(value).__name__)
    return left - right


def _subtraction(node: object) -> object:
    """``node`` as ``_ptf_sub(a, b)`` when it is ``a - b``; else ``node``."""
    if isinstance(node, _ast.BinOp) and isinstance(node.op, _ast.Sub):
        call = _ast.Call(_ast.Name("_ptf_sub", _ast.Load()), [node.left, node.right], [])
        _locate(call, node)
        return call
    return node


def _checked_subtractions(tree: _ast.AST) -> None:
    """Rewrite, in place, each subtraction below ``tree`` that a tolerance check reads: an
    operand of a comparison, the argument of ``abs``, ``math.fabs`` or ``round``."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, _ast.Compare):
            node.left = _subtraction(node.left)  # type: ignore[assignment]
            node.comparators = [_subtraction(c) for c in node.comparators]  # type: ignore[misc]
        elif isinstance(node, _ast.Call):
            function = node.func
            name = function.attr if isinstance(function, _ast.Attribute) else getattr(function, "id", "")
            if name in _READ_BY:
                node.args = [_subtraction(a) for a in node.args]  # type: ignore[misc]
        for field in node._fields:
            value = getattr(node, field, None)
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, _ast.AST):
                    todo.append(child)
