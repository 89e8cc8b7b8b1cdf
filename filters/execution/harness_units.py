"""The test runners of the execution harness (stdlib only; Python 3.11; never imported on the host).

:mod:`ptfactory.filters.execution.programs` sends this file's source into the sandbox ahead of
``harness.py``'s, as one ``program.py``: the names here are that program's globals. What it holds:
the runners of the tests' own units (pytest-style ``test*`` functions, parametrized too, and
``Test*`` classes, ``unittest.TestCase`` classes, doctest examples) and how the solution is
prepared: its stdin demo left out, LeetCode's typing names given, and the names it hands the tests
(none that shadows a builtin, no dunder).
"""

from __future__ import annotations

import _ast
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # the sandbox runs the files as one program: these names are its globals there
    from ptfactory.filters.execution.harness import _from_tests, _ptf_count, _ptf_raised, _Raised

# third-party packages a reply may reasonably import that the sandbox image lacks: a run that
# fails on one of these abstains (an environment limit), a made-up name still fails
_PACKAGES = (
    "numpy pandas scipy sympy sklearn torch tensorflow jax networkx requests matplotlib PIL cv2 bs4 "
    "yaml regex sortedcontainers more_itertools attr attrs pydantic numba polars pyarrow tqdm "
    "dateutil pytz statsmodels seaborn skimage z3 gmpy2 mpmath"
)
THIRD_PARTY = frozenset(_PACKAGES.split())
_missing: list[str] = []  # such modules a run failed to import


def _without_runners(tree: _ast.Module) -> None:
    """Leave out the tests' own ``unittest.main()`` / ``pytest.main()`` calls (at any depth, in an
    ``if __name__ == "__main__":`` block or not): they would look for tests in the harness and
    exit; the harness runs the TestCases and test functions itself."""
    for node in _nodes(tree):
        for field in ("body", "orelse"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            kept = [
                s
                for s in block
                if not (
                    isinstance(s, _ast.Expr)
                    and isinstance(s.value, _ast.Call)
                    and isinstance(s.value.func, _ast.Attribute)
                    and s.value.func.attr == "main"
                    and isinstance(s.value.func.value, _ast.Name)
                    and s.value.func.value.id in ("unittest", "pytest")
                )
            ]
            if len(kept) != len(block):
                setattr(
                    node, field, kept or [_ast.Pass(lineno=1, col_offset=0, end_lineno=1, end_col_offset=0)]
                )


def _humaneval_check(tree: _ast.Module, entry_point: str | None) -> bool:
    """The tests are HumanEval's: they define ``check`` taking one argument and never call it
    themselves, and the entry point is another function (MBPP's ``check(n)`` is the entry point)."""
    if not entry_point or entry_point == "check":
        return False
    defined = [n for n in tree.body if isinstance(n, _ast.FunctionDef) and n.name == "check"]
    if not defined or len(defined[-1].args.args) + len(defined[-1].args.posonlyargs) != 1:
        return False
    return not any(
        isinstance(n, _ast.Call) and isinstance(n.func, _ast.Name) and n.func.id == "check"
        for n in _nodes(tree)
    )


def _imported(tree: _ast.Module) -> set[str]:
    """The top-level names of the modules the tests import, anywhere in them."""
    names: set[str] = set()
    for node in _nodes(tree):
        if isinstance(node, _ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, _ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    names.discard("solution")
    names.discard("__future__")
    return names


def _preload(names: set[str]) -> None:
    """Import what the tests import before the solution loads, so the snapshot holds it as it was."""
    for name in sorted(names):
        try:
            __import__(name)
        except BaseException:  # a module the image lacks: the tests' import says so when it runs
            pass


def _forget_program() -> None:
    """Delete program.py (the tests, as text) before the solution loads: Python has read it."""
    try:
        os.unlink(sys.argv[0])
    except (OSError, IndexError):
        pass
    sys.argv[:] = ["solution.py"]


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


def _note_missing(error: object) -> None:
    """Remember a ModuleNotFoundError for a known third-party package (``error`` an exception or
    a unittest traceback's text)."""
    name = getattr(error, "name", None) if isinstance(error, ModuleNotFoundError) else None
    if isinstance(error, str) and "ModuleNotFoundError: No module named '" in error:
        name = error.split("ModuleNotFoundError: No module named '", 1)[1].split("'", 1)[0]
    if name and name.split(".")[0] in THIRD_PARTY:
        _missing.append(name.split(".")[0])


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


def _reads_stdin(node: _ast.AST, readers: set[str] | frozenset[str] = frozenset()) -> bool:
    """A statement that reads stdin: calls ``input()``, ``open(0)`` or one of ``readers`` (the
    solution's functions that do), or uses ``sys.stdin`` (``.read()``, ``.readline()``, ``for line
    in sys.stdin``; ``stdin`` imported from sys). With no input it can only fail."""
    for n in _nodes(node):
        if isinstance(n, _ast.Call) and isinstance(n.func, _ast.Name):
            if n.func.id == "input" or n.func.id in readers:
                return True
            if n.func.id == "open" and n.args and getattr(n.args[0], "value", None) == 0:
                return True
        if isinstance(n, _ast.Attribute) and n.attr == "stdin" and getattr(n.value, "id", "") == "sys":
            return True
        if isinstance(n, _ast.Name) and n.id == "stdin" and isinstance(n.ctx, _ast.Load):
            return True
    return False


def _without_stdin_demo(tree: _ast.Module) -> _ast.Module:
    """The solution less its top-level statements that read stdin, or call one of its functions
    that does (``main()`` reading ``n``): a reply's demo after the function the tests call.
    There is no input here, so such a line can only fail; definitions that read it are kept
    (called, they fail)."""
    defines = (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef, _ast.Import, _ast.ImportFrom)
    functions = {n.name: n for n in tree.body if isinstance(n, _ast.FunctionDef | _ast.AsyncFunctionDef)}
    readers: set[str] = set()
    grew = True
    while grew:  # the functions that read input, or call one that does
        grew = False
        for name, function in functions.items():
            if name not in readers and _reads_stdin(function, readers):
                readers.add(name)
                grew = True
    tree.body = [n for n in tree.body if isinstance(n, defines) or not _reads_stdin(n, readers)]
    return tree


# typing's names LeetCode's stubs use without importing them (LeetCode imports typing for them)
_TYPING = frozenset(
    {
        "List", "Dict", "Set", "FrozenSet", "Tuple", "Optional", "Union", "Any", "Callable", "Iterable",
        "Iterator", "Generator", "Sequence", "Mapping", "MutableMapping", "Deque", "DefaultDict",
        "OrderedDict", "Type",
    }
)  # fmt: skip


def _typing_names(tree: _ast.Module, into: dict[str, object]) -> None:
    """Put the typing names the solution uses into its module before it runs, as LeetCode does;
    its own definitions and imports, run after, win."""
    used = {n.id for n in _nodes(tree) if isinstance(n, _ast.Name)} & _TYPING
    if used:
        import typing

        into.update({name: getattr(typing, name) for name in sorted(used) if hasattr(typing, name)})


def _assigned(tree: _ast.Module) -> set[str]:
    """The attribute names the tests themselves assign (``builtins.input = ...``,
    ``setattr(m, "x", ...)``): the tests' own changes, not the solution's."""
    found: set[str] = set()
    for n in _nodes(tree):
        targets = getattr(n, "targets", None) or [getattr(n, "target", None)]
        if isinstance(n, _ast.Assign | _ast.AugAssign | _ast.AnnAssign):
            found |= {t.attr for t in targets if isinstance(t, _ast.Attribute)}
        if isinstance(n, _ast.Call) and getattr(n.func, "id", "") == "setattr" and len(n.args) > 1:
            found.add(str(getattr(n.args[1], "value", "")))
    return found


def _own_names(
    module: dict[str, object], builtin: set[str] | frozenset[str], entry: str | None
) -> dict[str, object]:
    """What the tests get from the solution: its names less dunders (``__builtins__``) and those
    that shadow a builtin (a solution's ``abs`` or ``set``), the entry point itself excepted."""
    return {k: v for k, v in module.items() if not k.startswith("__") and (k not in builtin or k == entry)}


def _is_test_case(value: object) -> bool:
    return isinstance(value, type) and any(
        c.__name__ == "TestCase" and c.__module__ == "unittest.case" for c in value.__mro__
    )


def _bare(function: object, arguments: int) -> bool:
    code = getattr(function, "__code__", None)
    return code is not None and code.co_argcount == arguments and not code.co_kwonlyargcount


def _test_functions(namespace: dict[str, object]) -> int:
    """Call the tests' own ``test*`` functions that take no argument (pytest style), in order, or
    once per parameter set of ``@pytest.mark.parametrize``; one that raises is a failed assertion at
    its ``def`` line. How many were called."""
    called = 0
    for name, value in list(namespace.items()):
        params = getattr(value, "_ptf_params", None)
        if not (name.startswith("test") and _from_tests(value) and (params or _bare(value, 0))):
            continue
        for arguments in params or [{}]:
            called += 1
            try:
                value(**arguments)  # type: ignore[operator]
            except BaseException:
                _ptf_count(_ptf_raised(), value.__code__.co_firstlineno)  # type: ignore[attr-defined]
    return called


def _test_classes(namespace: dict[str, object]) -> int:
    """pytest-style ``class Test*:`` without a ``TestCase`` base (nor an ``__init__``, which pytest
    skips): each ``test*(self)`` method runs on a fresh instance, ``setup_method``/
    ``teardown_method`` around it; one that raises is a failed assertion at its line."""
    called = 0
    for name, cls in list(namespace.items()):
        if not (isinstance(cls, type) and name.startswith("Test") and not _is_test_case(cls)):
            continue
        if "__init__" in vars(cls) or not any(_from_tests(v) for v in vars(cls).values()):
            continue
        for attr, method in list(vars(cls).items()):
            if not (attr.startswith("test") and _from_tests(method) and _bare(method, 1)):
                continue
            called += 1
            try:
                instance = cls()
                for hook in ("setup_method", "teardown_method"):
                    step = getattr(instance, hook, None)
                    if hook == "teardown_method":
                        method(instance)
                    if callable(step):
                        step(method)
            except BaseException:
                _ptf_count(_ptf_raised(), method.__code__.co_firstlineno)
    return called


def _last_line(trace: str) -> str:
    lines = trace.strip().splitlines()
    return lines[-1] if lines else trace


def _test_cases(namespace: dict[str, object]) -> int:
    """Run the tests' own ``unittest.TestCase`` classes: each test method is one assertion, held
    only when it ran and nothing failed in it (a ``subTest`` failure fails its test); an error
    outside any test (``setUpClass``) is one more failed assertion, and the tests it kept from
    running fail too. A skip the tests did not declare (a solution raising ``SkipTest``) fails.
    How many test methods there were."""
    classes = [
        value
        for value in list(namespace.values())
        if isinstance(value, type)
        and _is_test_case(value)
        and any(_from_tests(v) for v in vars(value).values())
    ]
    if not classes:
        return 0
    import unittest  # the tests imported it already: no start-up cost for tests without classes

    ran = 0
    started = _started_result()
    for cls in classes:
        result = started()
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(cls)
        cases = list(suite)  # a suite lets go of each test once it has run
        suite.run(result)
        bad: dict[int, str] = {}
        stray: list[str] = []
        wrong = [
            *result.failures,
            *result.errors,
            *((t, "unexpected success") for t in result.unexpectedSuccesses),
        ]
        for test, trace in wrong:
            owner = getattr(test, "test_case", test)  # a subTest's failure is its test's
            if any(owner is case for case in cases):
                bad.setdefault(id(owner), trace)
            else:  # an _ErrorHolder: setUpClass, a class or module fixture
                stray.append(trace)
        for test, why in result.skipped:
            method = getattr(cls, getattr(test, "_testMethodName", ""), None)
            if not (getattr(method, "__unittest_skip__", False) or getattr(cls, "__unittest_skip__", False)):
                bad.setdefault(id(test), f"skipped: {why}")
        first = 0
        for test in cases:
            ran += 1
            method = getattr(cls, getattr(test, "_testMethodName", ""), None)
            line = getattr(getattr(method, "__code__", None), "co_firstlineno", 0)
            first = first or line
            trace = bad.get(id(test)) or (None if id(test) in result.started else "the test did not run")
            if trace is not None:
                _note_missing(trace)
            _ptf_count(True if trace is None else _Raised(AssertionError(_last_line(trace))), line)
        for trace in stray:
            _note_missing(trace)
            _ptf_count(_Raised(AssertionError(_last_line(trace))), first)
    return ran


def _started_result() -> type:
    """A unittest result that remembers which tests started (a setUpClass error keeps the rest
    from starting: they did not pass)."""
    import unittest

    class Started(unittest.TestResult):
        def __init__(self) -> None:
            super().__init__()
            self.started: set[int] = set()

        def startTest(self, test: unittest.TestCase) -> None:
            self.started.add(id(test))
            super().startTest(test)

    return Started


def _count_doctests() -> None:
    """Each doctest example the tests run (``doctest.testmod()``, ``run_docstring_examples``) is one
    counted assertion: a failing one prints its report and still failed nothing before."""
    import doctest

    original = doctest.DocTestRunner.run

    def run(self: doctest.DocTestRunner, test: doctest.DocTest, *args: object, **kwargs: object) -> object:
        outcome = original(self, test, *args, **kwargs)  # type: ignore[arg-type]
        failed, tried = outcome
        for index in range(tried):
            held = index >= failed
            _ptf_count(held or _Raised(AssertionError(f"doctest {test.name}: an example failed")), 0)
        return outcome

    doctest.DocTestRunner.run = run  # type: ignore[assignment,method-assign]
