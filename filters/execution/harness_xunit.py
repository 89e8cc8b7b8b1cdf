"""The tests' units in the execution harness: pytest-style ones and ``unittest.TestCase`` classes
(stdlib only; Python 3.11; never imported on the host).

:mod:`ptfactory.filters.execution.programs` sends this file's source into the sandbox with the
harness's other files, as one ``program.py``: the names here are that program's globals.

What pytest would run, run as pytest would: the tests' ``test*`` functions and the ``test*``
methods of their ``class Test*`` (a fresh instance each), once per parameter set of
``@pytest.mark.parametrize`` (on a method or its class too), a parameter with a default left to
it, a ``mock.patch`` decorator's mocks passed by the decorator; the xunit hooks around them
(``setup_module``/``teardown_module(module)``, ``setup_function``/``teardown_function(function)``,
``setup_class``/``teardown_class(cls)``, ``setup_method``/``teardown_method(method)``, each with or
without its argument); pytest's ``capsys``, ``tmp_path`` and ``monkeypatch`` and the tests' own
fixtures given (``harness_fixtures.py``); then the ``TestCase`` classes, through unittest. A unit the harness cannot call (one that takes another fixture, an
``async def`` test) is never passed over: the run abstains (``unsupported:NAME(ARGS)``) unless
another test failed.
"""

from __future__ import annotations

import _ast
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # the sandbox runs the files as one program: these names are its globals there
    from ptfactory.filters.execution.harness import _from_tests, _ptf_count, _ptf_raised, _Raised
    from ptfactory.filters.execution.harness_fixtures import _fixtures_of, _unknown, _with_fixtures
    from ptfactory.filters.execution.harness_honest import _honest_asserts
    from ptfactory.filters.execution.harness_units import _is_test_case, _nodes, _note_missing

_unrunnable: list[str] = []  # the tests' units the harness could not call: the run abstains
_ASYNC = 0x80 | 0x100 | 0x200  # CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR


def _underlying(value: object) -> object:
    """What decorators wrapped (``functools.wraps``' ``__wrapped__``: ``mock.patch``, a
    staticmethod), a few levels deep."""
    try:
        for _ in range(8):
            inner = getattr(value, "__wrapped__", None)
            if inner is None:
                break
            value = inner
    except BaseException:  # an object whose attributes raise is no test of ours
        pass
    return value


def _ours(value: object) -> bool:
    """Defined by the tests (under its decorators)."""
    return _from_tests(_underlying(value))


def _line(value: object) -> int:
    return int(getattr(getattr(_underlying(value), "__code__", None), "co_firstlineno", 0))


def _mocks(function: object) -> tuple[int, list[str]]:
    """The arguments ``mock.patch`` decorators give ``function`` when called: how many positional
    ones (a mock each), and the names ``patch.multiple`` gives."""
    patchings = getattr(function, "patchings", None)
    if not isinstance(patchings, list):
        return 0, []
    default = getattr(sys.modules.get("unittest.mock"), "DEFAULT", None)
    made = [p for p in patchings if getattr(p, "new", None) is default]
    named = [str(p.attribute_name) for p in made if getattr(p, "attribute_name", None)]
    return len(made) - len(named), named


def _left_out(function: object, bound: bool, given: dict[str, object]) -> list[str] | None:
    """The parameters of the tests' ``function`` that nothing gives a value (pytest's fixtures:
    ``capsys``, ``tmp_path``) when it is called with ``given`` (``bound``: a method called on its
    instance); None when it cannot be called at all (``async def``)."""
    inner = _underlying(function)
    code = getattr(inner, "__code__", None)
    if code is None or code.co_flags & _ASYNC:
        return None
    defaults = len(getattr(inner, "__defaults__", None) or ())
    keyword_defaults = getattr(inner, "__kwdefaults__", None) or {}
    positional = list(code.co_varnames[: code.co_argcount])
    required = positional[: len(positional) - defaults][1 if bound else 0 :]
    count, named = _mocks(function)
    required = required[count:]  # mock.patch's mocks come after the caller's arguments
    keywords = code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
    required += [name for name in keywords if name not in keyword_defaults]
    return [name for name in required if name not in given and name not in named]


def _runnable(
    label: str,
    function: object,
    bound: bool,
    sets: list[dict[str, object]],
    available: dict[str, tuple[object, str, bool, str, bool]],
) -> list[str] | None:
    """The fixtures the unit takes with each parameter set, all of them ones the harness gives
    (pytest's ``capsys``, ``tmp_path``, ``monkeypatch``, the tests' own ``available``:
    ``harness_fixtures.py``); else None: the unit is remembered, the run abstains."""
    missing = [_left_out(function, bound, arguments) for arguments in sets]
    unknown = [("async" if m is None else _unknown(m, available)) for m in missing]
    found = list(missing[0] or []) if not any(unknown) else None
    if found is None:
        _unrunnable.append(f"{label}({next(u for u in unknown if u)})")
    return found


def _hook(step: object, argument: object) -> None:
    """Call an xunit hook of the tests as pytest does: with ``argument`` (the module, the class,
    the test) when it takes a parameter, without when it takes none."""
    if not (callable(step) and _ours(step)):
        return
    code = getattr(_underlying(step), "__code__", None)
    takes = 1
    if code is not None and not code.co_flags & 0x04:  # no *args
        takes = code.co_argcount - (1 if getattr(step, "__self__", None) is not None else 0)
    if takes > 0:
        step(argument)
    else:
        step()


def _called(tree: _ast.Module) -> set[str]:
    """The names the tests call (``f(...)``)."""
    return {n.func.id for n in _nodes(tree) if isinstance(n, _ast.Call) and isinstance(n.func, _ast.Name)}


def _params(value: object) -> list[dict[str, object]]:
    return list(getattr(value, "_ptf_params", None) or [{}])


def _test_functions(
    namespace: dict[str, object], tree: _ast.Module, available: dict[str, tuple[object, str, bool, str, bool]]
) -> int:
    """Call the tests' own ``test*`` functions (pytest style), in order, once per parameter set of
    ``@pytest.mark.parametrize``, ``setup_function``/``teardown_function`` around each; one that
    raises is a failed assertion at its ``def`` line; one the tests call themselves with arguments
    (``def test_case(a, want)`` then ``test_case(1, 2)`` in ``tree``) is their helper, not a unit.
    How many were called."""
    called = 0
    setup, teardown = namespace.get("setup_function"), namespace.get("teardown_function")
    for name, value in list(namespace.items()):
        if not (name.startswith("test") and callable(value) and _ours(value)):
            continue
        if getattr(value, "_ptf_fixture", None):
            continue  # a fixture named test_*
        sets = _params(value)
        if _left_out(value, False, sets[0]) and name in _called(tree):
            continue  # the tests' own helper, called by them
        fixtures = _runnable(name, value, False, sets, available)
        if fixtures is None:
            continue
        for arguments in sets:
            called += 1
            try:
                _hook(setup, value)
                try:
                    _with_fixtures(value, arguments, fixtures, available)
                finally:
                    _hook(teardown, value)
            except BaseException:
                _ptf_count(_ptf_raised(), _line(value))
    return called


def _test_classes(
    namespace: dict[str, object], shared: dict[str, tuple[object, str, bool, str, bool]]
) -> int:
    """pytest-style ``class Test*:`` without a ``TestCase`` base (nor an ``__init__``, which pytest
    skips): each ``test*`` method runs on a fresh instance (once per parameter set),
    ``setup_method``/``teardown_method`` around it, ``setup_class``/``teardown_class`` around
    them all; one that raises is a failed assertion at its line (an error in ``setup_class``
    fails each)."""
    called = 0
    for name, cls in list(namespace.items()):
        if not (isinstance(cls, type) and name.startswith("Test") and not _is_test_case(cls)):
            continue
        if "__init__" in vars(cls) or not any(_ours(v) for v in vars(cls).values()):
            continue
        tests = [
            (a, m)
            for a, m in list(vars(cls).items())
            if a.startswith("test") and _ours(m) and not getattr(m, "_ptf_fixture", None)
        ]
        available = {**shared, **_fixtures_of(dict(vars(cls)), True)}
        broken: _Raised | None = None
        try:
            _hook(getattr(cls, "setup_class", None), cls)
        except BaseException:
            broken = _ptf_raised()
        for attr, method in tests:
            sets = [{**c, **m} for c in _params(cls) for m in _params(method)]
            bound = not isinstance(method, staticmethod)
            fixtures = _runnable(f"{name}.{attr}", method, bound, sets, available)
            if fixtures is None:
                continue
            for arguments in sets:
                called += 1
                if broken is not None:
                    _ptf_count(broken, _line(method))
                    continue
                try:
                    instance = cls()
                    test = getattr(instance, attr)
                    _hook(getattr(instance, "setup_method", None), test)
                    try:
                        _with_fixtures(test, arguments, fixtures, available, instance)
                    finally:
                        _hook(getattr(instance, "teardown_method", None), test)
                except BaseException:
                    _ptf_count(_ptf_raised(), _line(method))
        try:
            _hook(getattr(cls, "teardown_class", None), cls)
        except BaseException:
            _ptf_count(_ptf_raised(), _line(cls.__dict__.get("teardown_class")))
    return called


def _run_units(namespace: dict[str, object], module: object, tree: _ast.Module) -> int:
    """Run the tests' units (test functions, Test classes, TestCases), ``setup_module`` and
    ``teardown_module`` around them (an error in either is a failed assertion); how many ran.
    ``tree``: the tests, whose own calls name their helpers."""
    try:
        _hook(namespace.get("setup_module"), module)
    except BaseException:
        _ptf_count(_ptf_raised(), _line(namespace.get("setup_module")))
    fixtures = _fixtures_of(namespace, False)  # the tests' own @pytest.fixture functions
    ran = (
        _test_functions(namespace, tree, fixtures)
        + _test_classes(namespace, fixtures)
        + _test_cases(namespace)
    )
    try:
        _hook(namespace.get("teardown_module"), module)
    except BaseException:
        _ptf_count(_ptf_raised(), _line(namespace.get("teardown_module")))
    return ran


def _last_line(trace: str) -> str:
    lines = trace.strip().splitlines()
    return lines[-1] if lines else trace


def _test_cases(namespace: dict[str, object]) -> int:
    """Run the tests' own ``unittest.TestCase`` classes: each test method is one assertion, held
    only when it ran and nothing failed in it (a ``subTest`` failure fails its test); an error
    outside any test (``setUpClass``) is one more failed assertion, and the tests it kept from
    running fail too. A skip the tests did not declare (a solution raising ``SkipTest``) fails.
    An always-equal argument fails an ``assert*`` method. How many test methods there were."""
    classes = [
        value
        for value in list(namespace.values())
        if isinstance(value, type)
        and _is_test_case(value)
        and any(_ours(v) for v in vars(value).values())  # its methods, under a mock.patch too
    ]
    if not classes:
        return 0
    import unittest  # the tests imported it already: no start-up cost for tests without classes

    ran = 0
    started = _started_result()
    for cls in classes:
        _honest_asserts(cls)  # assertEqual and the rest fail on an always-equal argument
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
            line = _line(method)  # under a mock.patch decorator too
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
