"""The test harness that runs inside the sandbox and counts assertions (stdlib only; Python 3.11).

Its code never runs on the host (the host reads this file's text; programs.py takes
``ASSERTIONS_MARK`` from it too, so nothing on the host imports this module):
:func:`ptfactory.filters.execution.programs.program` sends this file's source, followed by one
``run(solution, tests, entry_point)`` call, as the job's ``program.py``.
Parsing and rewriting the tests happens here, inside the sandbox, because the tests are model
output too.

Each ``assert test, msg`` of the tests becomes a counted check: the test is evaluated, an
exception or a false value counts as a failed assertion, and the run goes on to the next one
(HumanEval's ``check`` would stop at the first). The last line written is
``ASSERTIONS_MARK passed total``; the exit code is 0 only when every assertion held and nothing
raised, so the status means what it meant before the counting (``passed`` = all tests pass).

Tests come in four shapes: HumanEval's ``check(candidate)`` (called with the entry point),
MBPP's top-level asserts (they run as the tests load), pytest-style ``test*`` functions that take
no argument (each called; one that raises fails once, at its ``def`` line) and ``unittest.TestCase``
classes (each test method one assertion). Tests that only define functions or classes nothing
calls (``check`` without an entry point) fail with "no test ran": 0 of 0 assertions is no pass.

The solution loads as the module ``solution`` (its ``if __name__ == "__main__":`` block does not
run; tests may ``from solution import f``), less its top-level statements that call ``input()``:
there is no input in the sandbox, so a demo line such as ``print(inc(int(input())))`` after a
right ``inc`` could only fail it with EOFError. An entry point defined only as a method of a
solution's class (``class Solution: def two_sum(self, ...)``) is called on an instance. The
sandbox has no pytest: pytest-style tests get a stand-in module with ``raises`` and ``approx``.

``total`` is the number of assertions evaluated (an assert in a loop counts each time); when the
run stops early (an exception outside an assert, a solution that does not import) it is at least
the number of asserts written in the tests, so a solution that crashes early is not graded on
the few it reached. The counts are as trustworthy as the exit status: the solution runs in this
process and could fake either; the sandbox bounds what code can do, not its honesty.
"""

from __future__ import annotations

# Only built-in modules: every job starts a fresh interpreter, and `ast` and `typing` (what this
# file used before) were about 15 ms of CPU per job, half of a typical job's cost in the sandbox.
import _ast
import os
import sys

ASSERTIONS_MARK = "@ptf-assertions"

_counts = [0, 0]  # passed, evaluated
_write = os.write  # taken before any untrusted code runs


class _Raised:
    """What an assert's test evaluated to when evaluating it raised."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def _ptf_raised() -> _Raised:
    return _Raised(sys.exc_info()[1])


def _ptf_count(value: object, line: int) -> None:
    """Called in place of each assert, with the test's value (or a _Raised)."""
    why = "assertion failed"
    if isinstance(value, _Raised):
        held, why = False, f"raised {type(value.error).__name__}"
        try:
            why += f": {value.error}"[:300]
        except BaseException:  # an exception whose str() raises still counts as one failed assert
            pass
    else:
        try:
            held = bool(value)
        except BaseException:  # a __bool__ that raises is a failed assertion, not a crash
            held = False
    _counts[0] += held
    _counts[1] += 1
    if not held:  # what a reader of the log needs: which assert, since none stops the run any more
        _write(2, f"tests.py:{line}: {why}\n".encode())


def _locate(node: _ast.AST, where: _ast.AST) -> None:
    """Give ``node`` and its children that have no position ``where``'s (what
    ``ast.copy_location`` and ``ast.fix_missing_locations`` did)."""
    if "lineno" in node._attributes and getattr(node, "lineno", None) is None:
        for name in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
            setattr(node, name, getattr(where, name, None))
    for field in node._fields:
        value = getattr(node, field, None)
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, _ast.AST):
                _locate(child, where)


def _counted(node: _ast.Assert) -> list[_ast.stmt]:
    """``assert test, msg`` → ``try: _ptf_ok = test / except BaseException: _ptf_ok = _ptf_raised()``
    then ``_ptf_count(_ptf_ok, line)``. BaseException: a candidate calling ``sys.exit`` fails that
    assert only. The names start with one underscore: two would be mangled inside a class body."""

    def store(value: _ast.expr) -> _ast.Assign:
        return _ast.Assign([_ast.Name("_ptf_ok", _ast.Store())], value)

    raised = _ast.Call(_ast.Name("_ptf_raised", _ast.Load()), [], [])
    handler = _ast.ExceptHandler(_ast.Name("BaseException", _ast.Load()), None, [store(raised)])
    guarded = _ast.Try([store(node.test)], [handler], [], [])
    count = _ast.Expr(
        _ast.Call(
            _ast.Name("_ptf_count", _ast.Load()),
            [_ast.Name("_ptf_ok", _ast.Load()), _ast.Constant(node.lineno)],
            [],
        )
    )
    for made in (guarded, count):
        _locate(made, node)
    return [guarded, count]


def _rewrite(node: _ast.AST) -> int:
    """Replace every assert below ``node`` by its counted form, in place (what an
    ``ast.NodeTransformer`` with ``visit_Assert`` did); the number of asserts replaced."""
    found = 0
    for field in node._fields:
        value = getattr(node, field, None)
        if isinstance(value, list):
            items: list[object] = []
            for item in value:
                if isinstance(item, _ast.Assert):
                    items.extend(_counted(item))
                    found += 1
                else:
                    if isinstance(item, _ast.AST):
                        found += _rewrite(item)
                    items.append(item)
            setattr(node, field, items)
        elif isinstance(value, _ast.AST):
            found += _rewrite(value)
    return found


def _nodes(node: _ast.AST) -> list[_ast.AST]:
    """``node`` and every node under it (the ``ast`` module's walk, which this file does not import)."""
    found, todo = [], [node]
    while todo:
        current = todo.pop()
        found.append(current)
        for field in current._fields:
            value = getattr(current, field, None)
            if isinstance(value, _ast.AST):
                todo.append(value)
            elif isinstance(value, list):
                todo.extend(v for v in value if isinstance(v, _ast.AST))
    return found


def _reads_stdin(node: _ast.AST) -> bool:
    """A statement that calls ``input()`` (with no input it can only raise EOFError; a read of
    ``sys.stdin`` gets an empty text and may be harmless, so it stays)."""
    return any(
        isinstance(n, _ast.Call) and isinstance(n.func, _ast.Name) and n.func.id == "input"
        for n in _nodes(node)
    )


def _without_stdin_demo(tree: _ast.Module) -> _ast.Module:
    """The solution less its top-level statements that call ``input()``: a reply's demo
    (``print(inc(int(input())))``) after the function the tests call. There is no input here, so
    such a line can only raise EOFError; definitions that read it are kept (called, they fail)."""
    defines = (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef)
    tree.body = [n for n in tree.body if isinstance(n, defines) or not _reads_stdin(n)]
    return tree


def _method_entry(namespace: dict[str, object], entry_point: str | None) -> None:
    """An entry point the solution defines only as a method of one of its classes (LeetCode's
    ``class Solution: def two_sum(self, ...)``) is bound on an instance made without arguments,
    so ``check(candidate)`` and top-level asserts call it as the function they expect."""
    if not entry_point or entry_point in namespace:
        return
    for value in list(namespace.values()):
        if (
            isinstance(value, type)
            and value.__module__ == "solution"
            and callable(vars(value).get(entry_point))
        ):
            namespace[entry_point] = getattr(value(), entry_point)
            return


def _runs_code(tree: _ast.Module) -> bool:
    """The tests' top level does more than define and import (an assert, a call, a loop...)."""
    quiet = (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef, _ast.Import, _ast.ImportFrom)
    return any(not isinstance(node, quiet) for node in tree.body)


def _from_tests(value: object) -> bool:
    code = getattr(value, "__code__", None)
    return code is not None and code.co_filename == "tests.py"


class _RaisesContext:
    """``with pytest.raises(E, match=...)``: the block must raise ``E`` (its message matching)."""

    def __init__(self, expected: type[BaseException], match: str | None = None) -> None:
        self.expected, self.match, self.value = expected, match, None

    def __enter__(self) -> _RaisesContext:
        return self

    def __exit__(self, kind: object, value: BaseException | None, trace: object) -> bool:
        if value is None:
            raise AssertionError(f"DID NOT RAISE {self.expected}")
        if not isinstance(value, self.expected):
            return False  # another exception goes on, as in pytest
        if self.match is not None:
            import re  # only for a match: no start-up cost for every job

            if not re.search(self.match, str(value)):
                raise AssertionError(f"{str(value)!r} does not match {self.match!r}")
        self.value = value  # type: ignore[assignment]
        return True


class _Approx:
    """``x == pytest.approx(y)``: within ``rel`` (1e-6) of ``y``, or ``abs`` (1e-12)."""

    __hash__ = None  # type: ignore[assignment]  # compared, never hashed (as pytest's)

    def __init__(self, expected: float, rel: float = 1e-6, abs: float = 1e-12) -> None:
        self.expected, self.tolerance = expected, max(rel * (expected if expected > 0 else -expected), abs)

    def __eq__(self, other: object) -> bool:
        try:
            return bool(-self.tolerance <= other - self.expected <= self.tolerance)  # type: ignore[operator]
        except TypeError:
            return False

    def __repr__(self) -> str:
        return f"approx({self.expected!r})"


def _pytest_shim() -> None:
    """A ``pytest`` module with ``raises`` and ``approx`` where pytest is not installed (the
    sandbox image has none), so pytest-style tests that use them run instead of failing on the
    import; tests that need more of pytest (fixtures, marks) fail as before."""
    try:
        import pytest  # noqa: F401  # a real one wins
    except ImportError:
        module = type(sys)("pytest")
        module.raises = _RaisesContext  # type: ignore[attr-defined]
        module.approx = _Approx  # type: ignore[attr-defined]
        sys.modules["pytest"] = module


def _test_functions(namespace: dict[str, object]) -> int:
    """Call the tests' own ``test*`` functions that take no argument (pytest style), in order; one
    that raises is a failed assertion at its ``def`` line. How many were called."""
    called = 0
    for name, value in list(namespace.items()):
        if name.startswith("test") and _from_tests(value) and callable(value):
            code = value.__code__  # type: ignore[attr-defined]
            if code.co_argcount or code.co_kwonlyargcount:
                continue  # a helper or a fixture user: not callable bare
            called += 1
            try:
                value()
            except BaseException:
                _ptf_count(_ptf_raised(), code.co_firstlineno)
    return called


def _test_cases(namespace: dict[str, object]) -> int:
    """Run the tests' own ``unittest.TestCase`` classes: each test method is one assertion (a
    failure or an error fails it, at the method's line). How many test methods ran."""
    classes = [
        value
        for value in list(namespace.values())
        if isinstance(value, type)
        and any(c.__name__ == "TestCase" and c.__module__ == "unittest.case" for c in value.__mro__)
        and any(_from_tests(v) for v in vars(value).values())
    ]
    if not classes:
        return 0
    import unittest  # the tests imported it already: no start-up cost for tests without classes

    ran = 0
    for cls in classes:
        result = unittest.TestResult()
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(cls)
        cases = list(suite)  # a suite lets go of each test once it has run
        suite.run(result)
        bad = {id(test): trace for test, trace in result.failures + result.errors}
        for test in cases:
            ran += 1
            method = getattr(cls, getattr(test, "_testMethodName", ""), None)
            line = getattr(getattr(method, "__code__", None), "co_firstlineno", 0)
            trace = bad.get(id(test))
            _ptf_count(
                True if trace is None else _Raised(AssertionError(trace.strip().splitlines()[-1])), line
            )
    return ran


def run(solution: str, tests: str, entry_point: str | None) -> None:
    # Only as the sandbox job's program.py (run as __main__): imported on the host, as a module,
    # this refuses, so untrusted code can never be exec'd outside the sandbox by a stray call.
    if __name__ != "__main__":
        raise RuntimeError("the execution harness runs only inside the sandbox, as its program.py")
    # taken before any untrusted code runs: a solution that rebinds print or sys.exit changes nothing here
    flush, leave = sys.stdout.flush, os._exit
    written = 0
    ok = False
    try:
        # dont_inherit: this file's ``from __future__`` import must not change how the code compiles
        tree = compile(tests, "tests.py", "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
        if not isinstance(tree, _ast.Module):  # what "exec" mode always parses to
            raise TypeError(f"tests parsed to {type(tree).__name__}")
        written = _rewrite(tree)
        code = compile(tree, "tests.py", "exec", dont_inherit=True)
        # The solution loads as the module ``solution`` (not ``__main__``), as HumanEval's exec of
        # prompt + completion does: a reply's ``if __name__ == "__main__":`` demo (often an
        # ``input()``) stays out of the run, and tests that ``from solution import f`` find it.
        # The tests run as ``__main__`` with the solution's names, as they would in its file.
        if "pytest" in tests:  # the import search only for tests that name it, not every job
            _pytest_shim()
        module = type(sys)("solution")
        sys.modules["solution"] = module
        parsed = compile(solution, "solution.py", "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
        if not isinstance(parsed, _ast.Module):  # what "exec" mode always parses to
            raise TypeError(f"solution parsed to {type(parsed).__name__}")
        exec(compile(_without_stdin_demo(parsed), "solution.py", "exec", dont_inherit=True), module.__dict__)
        namespace: dict[str, object] = {
            **module.__dict__,
            "__name__": "__main__",
            "_ptf_count": _ptf_count,
            "_ptf_raised": _ptf_raised,
        }
        _method_entry(namespace, entry_point)
        exec(code, namespace)
        # HumanEval-style tests define check(candidate); MBPP-style ones are top-level asserts that
        # call the function by name and have already run above; pytest- and unittest-style ones
        # define test_ functions and TestCase classes that nothing calls: they are called here
        checked = bool(entry_point) and callable(namespace.get("check"))
        if entry_point and checked:
            namespace["check"](namespace[entry_point])  # type: ignore[operator]
        tested = _test_functions(namespace) + _test_cases(namespace)
        if not (checked or tested or _counts[1] or _runs_code(tree)):
            # definitions only, none called: 0 of 0 assertions would read as a pass
            raise RuntimeError(
                "no test ran: the tests only define functions or classes and nothing calls them"
                + (" (check(candidate) needs the entry point)" if "check" in namespace else "")
            )
        ok = True
    except BaseException:  # the traceback goes to stderr, as it would without the harness
        import traceback

        traceback.print_exc()
    passed, evaluated = _counts
    total = evaluated if ok else max(evaluated, written)
    try:
        flush()
        sys.stderr.flush()
    except BaseException:  # a solution may have closed or replaced the streams
        pass
    _write(1, f"\n{ASSERTIONS_MARK} {passed} {total}\n".encode())
    leave(0 if ok and passed == total else 1)
