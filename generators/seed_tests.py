"""What a code seed's tests must look like: the shapes the execution harness runs
(filters/execution/harness.py), checked by parsing alone (seed code never runs outside the sandbox).
A seed with MBPP-style tests may leave out ``entry_point``: the one function its top-level asserts
call is the entry point (:func:`called_entry`).

Tests are text, or a list of lines (MBPP's ``test_list``) that ``filters.verify.inputs.tests_text``
joins, as for ``ptf judge --tests-column``. They must define ``check(candidate)``
(HumanEval), assert on the entry point at top level (MBPP), or define ``test*`` functions without
arguments, ``class Test*`` methods or a ``unittest.TestCase`` (pytest, unittest), or run doctest
(``doctest.testmod()``). An entry point may be written ``f()``, ``module.f`` or ``Solution.f``.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterable

from ptfactory.errors import SeedError
from ptfactory.filters.execution.solutions import entry_name

__all__ = ["called_entry", "called_function", "check_code_fields", "needs_entry"]


def called_entry(tests: str | None) -> str | None:
    """The function tests call when a seed (or a ``ptf judge`` row) names no entry point: the one
    name, not a builtin, that the top-level asserts call (``assert minimum(1, 2) == 1`` ->
    ``minimum``); without top-level asserts, the one such name the asserts and ``self.assert*``
    calls anywhere in the tests call that the tests do not define or import themselves. None when
    there is none or several, or the tests do not parse (the caller then says what is missing)."""
    try:
        tree = ast.parse(tests or "")
    except SyntaxError:
        return None
    top = _called(s.test for s in tree.body if isinstance(s, ast.Assert))
    if top:
        return top.pop() if len(top) == 1 else None
    own = {"candidate", "self", "cls"}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)
        elif isinstance(node, ast.arg):
            own.add(node.arg)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            own.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
    checked: list[ast.AST] = [n.test for n in ast.walk(tree) if isinstance(n, ast.Assert)]
    checked += [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.startswith("assert")
    ]
    anywhere = _called(checked) - own
    return anywhere.pop() if len(anywhere) == 1 else None


def called_function(tests: str | None, code: str) -> str | None:
    """Of the names the tests' asserts call (``Pair(...)`` and ``max_chain_length(...)``), the
    last one ``code`` (the reply's) defines as a function; None when there is none."""
    try:
        tree = ast.parse(tests or "")
    except SyntaxError:
        return None
    called = _called(n.test for n in ast.walk(tree) if isinstance(n, ast.Assert))
    defined = re.findall(r"^(?:async\s+)?def\s+(\w+)\s*\(", code, re.M)
    hits = [name for name in defined if name in called]
    return hits[-1] if hits else None


def needs_entry(tests: str | None) -> bool:
    """The tests define HumanEval's ``check(candidate)``: only they need an entry point to call
    (asserts, test functions and TestCases call what they test themselves)."""
    return bool(re.search(r"^\s*def\s+check\s*\(", tests or "", re.M))


def _called(tests: Iterable[ast.AST]) -> set[str]:
    """The names, not builtins, that ``tests`` call."""
    return {
        node.func.id
        for test in tests
        for node in ast.walk(test)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and not hasattr(builtins, node.func.id)
    }


def check_code_fields(where: str, entry_point: str | None, tests: str | None) -> None:
    if entry_point is None:
        raise SeedError(f"{where}: field 'entry_point' is missing; code seeds name the function to test")
    if not (entry_name(entry_point) or "").isidentifier():
        raise SeedError(f"{where}: field 'entry_point' is {entry_point!r}, not a Python function name")
    if tests is None:
        raise SeedError(
            f"{where}: field 'tests' is missing; code seeds need tests: a check(candidate) or top-level asserts"
        )
    try:
        tree = ast.parse(tests)  # parsing only: seed code is never executed outside the sandbox
    except SyntaxError as exc:
        raise SeedError(
            f"{where}: field 'tests' is not valid Python ({exc.msg}, line {exc.lineno})"
        ) from None
    if not any(isinstance(n, ast.FunctionDef) and n.name == "check" for n in tree.body) and not (
        _asserts_on(tree, entry_name(entry_point) or entry_point) or _test_units(tree)
    ):
        raise SeedError(
            f"{where}: field 'tests' neither defines check(candidate) (HumanEval-style), nor asserts "
            f"on {entry_point}(...) at top level (MBPP-style), nor defines test functions without "
            "arguments or a class Test* (pytest-style), a unittest.TestCase class, or runs doctest"
        )


def _bare_test(node: ast.FunctionDef) -> bool:
    arguments = node.args
    return node.name.startswith("test") and not (
        arguments.args or arguments.posonlyargs or arguments.kwonlyargs
    )


def _test_units(tree: ast.Module) -> bool:
    """Top-level ``test*`` functions without arguments, a class deriving from ``TestCase``, a
    pytest-style ``class Test*`` with ``test*`` methods, or doctest run by the tests
    (``doctest.testmod()``): what the execution harness runs (filters/execution/harness.py)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and _bare_test(node):
            return True
        if isinstance(node, ast.ClassDef):
            bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]
            methods = [n for n in node.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]
            if "TestCase" in bases or (node.name.startswith("Test") and not bases and methods):
                return True
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("testmod", "run_docstring_examples")
        for n in ast.walk(tree)
    )


def _asserts_on(tree: ast.Module, name: str) -> bool:
    """Whether a top-level assert (outside any function or class, so it runs) names ``name``."""
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if isinstance(node, ast.Assert):
            if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.test)):
                return True
            continue
        pending.extend(ast.iter_child_nodes(node))
    return False
