"""The pytest stand-in of the execution harness and its snapshot (stdlib only; Python 3.11; never
imported on the host): the sandbox image has no pytest, so tests that ``import pytest`` get a module
with ``raises`` (a context, or ``raises(E, func, *args)``), ``approx`` (numbers, sequences, dicts;
pytest's tolerance rules), ``param``, ``mark.parametrize`` and ``fixture`` (``harness_fixtures.py``);
another pytest name (``mark.skip``, ``monkeypatch`` as a name) makes the run abstain (``unsupported:pytest.NAME``). The snapshot catches a solution
rebinding what the tests use (``builtins.bool``, ``math.isclose``, a ``TestCase`` method or its
``__code__``, the stand-in's classes). :mod:`ptfactory.filters.execution.programs` sends this
file's source into the sandbox with ``harness_units.py`` and ``harness.py`` as one ``program.py``."""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # the sandbox runs the files as one program: these names are its globals there
    from typing import Any

    from ptfactory.filters.execution.harness import _ptf_count
    from ptfactory.filters.execution.harness_fixtures import _fixture_mark
    from ptfactory.filters.execution.harness_units import _nodes


class _RaisesContext:
    """``with pytest.raises(E, match=...)``: the block must raise ``E`` (its message matching); a
    block that does is one held assertion."""

    def __init__(
        self, expected: type[BaseException] | tuple[type[BaseException], ...], match: str | None = None
    ) -> None:
        self.expected, self.match = expected, match
        self.value: BaseException | None = None
        self.type: type[BaseException] | None = None

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
        self.value, self.type = value, type(value)
        _ptf_count(True, 0)
        return True


def _raises(
    expected: type[BaseException], *args: object, match: str | None = None, **kwargs: object
) -> _RaisesContext:
    """``pytest.raises(E)`` as a context, or ``pytest.raises(E, func, *args, **kwargs)`` called."""
    context = _RaisesContext(expected, match)
    if args:
        with context:
            args[0](*args[1:], **kwargs)  # type: ignore[operator]
    return context


def _isnan(value: float) -> bool:
    return value != value  # noqa: PLR0124 - nan, without importing math for every job


class _Approx:
    """``x == pytest.approx(y)`` as pytest has it: within ``rel`` (1e-6) of ``y`` or ``abs``
    (1e-12); ``abs`` given alone is the only tolerance; ``y`` a number, a sequence or a dict."""

    __hash__ = None  # type: ignore[assignment]  # compared, never hashed (as pytest's)

    def __init__(
        self, expected: object, rel: float | None = None, abs: float | None = None, nan_ok: bool = False
    ) -> None:
        self.expected, self.rel, self.abs, self.nan_ok = expected, rel, abs, nan_ok

    def _tolerance(self, expected: float) -> float:
        if self.rel is None and self.abs is not None:
            return self.abs
        rel = 1e-6 if self.rel is None else self.rel
        return max(rel * (expected if expected > 0 else -expected), 1e-12 if self.abs is None else self.abs)

    def _close(self, actual: object, expected: object) -> bool:
        if isinstance(expected, dict):
            return (
                isinstance(actual, dict)
                and actual.keys() == expected.keys()
                and all(self._close(actual[k], expected[k]) for k in expected)
            )
        if isinstance(expected, list | tuple):
            return (
                isinstance(actual, list | tuple)
                and len(actual) == len(expected)
                and all(self._close(a, e) for a, e in zip(actual, expected, strict=True))
            )
        if isinstance(expected, bool) or not isinstance(expected, int | float):
            return bool(actual == expected)
        if isinstance(actual, bool) or not isinstance(actual, int | float):
            return False
        if actual == expected:
            return True
        if _isnan(expected):
            return self.nan_ok and _isnan(actual)
        return bool(-self._tolerance(expected) <= actual - expected <= self._tolerance(expected))

    def __eq__(self, other: object) -> bool:
        try:
            return self._close(other, self.expected)
        except TypeError:
            return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __repr__(self) -> str:
        return f"approx({self.expected!r})"


_unsupported: list[str] = []  # pytest features the stand-in lacks that the tests used
_mentioned: set[str] = set()  # every name the tests write: a feature they never name is not theirs


def _mention(tree: object) -> None:
    """Note the names the tests write (names, attributes, imports, strings): a pytest feature the
    stand-in lacks abstains the run only where the tests use it; a solution's own
    ``pytest.skip(...)`` (a skip of the tests it is not theirs to make) fails instead."""
    for node in _nodes(tree):  # type: ignore[arg-type]
        for field in ("attr", "id", "name", "value"):
            word = getattr(node, field, None)
            if isinstance(word, str):
                _mentioned.add(word)


class _Param(tuple):  # type: ignore[type-arg]
    """``pytest.param(*values)``: one parameter set."""


class _Mark:
    """``@pytest.mark.parametrize(names, values)`` gives the test function its parameter sets (the
    harness runs one test per set); ``skip``, ``skipif``, ``xfail`` and ``usefixtures`` make the run
    abstain; other marks (``slow``, ``timeout``) change nothing."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: object, **kwargs: object) -> object:
        if self.name != "parametrize" and len(args) == 1 and callable(args[0]) and not kwargs:
            return self._mark(args[0])  # a bare @pytest.mark.slow
        return self._mark if self.name != "parametrize" else (lambda f: self._parametrize(f, *args))

    def _mark(self, function: object) -> object:
        if self.name in ("skip", "skipif", "xfail", "usefixtures") and self.name in _mentioned:
            _unsupported.append(f"pytest.mark.{self.name}")
        return function

    @staticmethod
    def _parametrize(function: object, argnames: object, values: object = (), *rest: object) -> object:
        if isinstance(argnames, str):
            argnames = [n.strip() for n in argnames.split(",") if n.strip()]
        names: list[str] = list(argnames)  # type: ignore[call-overload]
        sets: list[dict[str, object]] = []
        value: Any
        for value in values:  # type: ignore[attr-defined]
            if len(names) == 1 and not (isinstance(value, _Param) and len(value) != 1):
                sets.append({names[0]: value[0] if isinstance(value, _Param) else value})
            else:
                sets.append(dict(zip(names, value, strict=False)))
        before = getattr(function, "_ptf_params", [{}])
        function._ptf_params = [{**a, **b} for b in sets for a in before]  # type: ignore[attr-defined]
        return function


class _Marks:
    def __getattr__(self, name: str) -> _Mark:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Mark(name)


def _missing_feature(name: str) -> object:
    """A pytest name the stand-in lacks (``skip``, ``warns``...): the run abstains on it."""
    if not name.startswith("_") and name in _mentioned:  # the harness's probes (_ptf_params) are no test's
        _unsupported.append(f"pytest.{name}")
    raise AttributeError(f"the harness's pytest stand-in has no {name!r}")


def _pytest_shim() -> None:
    """A ``pytest`` module with ``raises``, ``approx``, ``param``, ``mark`` (``parametrize``) and
    ``fixture`` where pytest is not installed (the sandbox image has none), so pytest-style tests
    that use them run instead of failing on the import; tests that need more of pytest (skip marks,
    ``pytest.warns``) abstain (``unsupported:pytest.NAME``)."""
    try:
        import pytest  # noqa: F401  # a real one wins
    except ImportError:
        module = type(sys)("pytest")
        module.raises = _raises  # type: ignore[attr-defined]
        module.approx = _Approx  # type: ignore[attr-defined]
        module.param = lambda *values, **kwargs: _Param(values)  # type: ignore[attr-defined]
        module.mark = _Marks()  # type: ignore[attr-defined]
        module.fixture = _fixture_mark  # type: ignore[attr-defined]
        setattr(module, "__getattr__", _missing_feature)  # noqa: B010 - PEP 562: pytest.warns abstains
        sys.modules["pytest"] = module


_SNAPSHOT_SKIP = frozenset({"sys", "__main__", "solution"})


def _snapshot(modules: set[str]) -> list[tuple[object, str, object, str]]:
    """What the tests lean on, taken before the solution loads: the attributes of ``builtins``, of
    the modules the tests import (and their submodules) and of the classes those define (the pytest
    stand-in's too), the ``__code__`` of their functions (swapped in place, the function object
    stays), and those modules' entries in ``sys.modules`` (a lenient ``unittest`` of the
    solution's there would be what the tests import)."""
    taken: list[tuple[object, str, object, str]] = []

    def take(mapping: object, key: str, value: object, label: str) -> None:
        taken.append((mapping, key, value, label))
        code = getattr(value, "__code__", None) if type(value).__name__ == "function" else None
        if code is not None:
            taken.append((value, "__code__", code, f"{label}.__code__"))

    def members(cls: type, label: str, every: bool = False) -> None:
        for attr, member in list(vars(cls).items()):
            if every or not attr.startswith("__") or attr in ("__eq__", "__ne__", "__bool__"):
                take(vars(cls), attr, member, f"{label}.{attr}")

    for name, module in list(sys.modules.items()):
        top = name.split(".")[0]
        if module is None or top in _SNAPSHOT_SKIP or not (name == "builtins" or top in modules):
            continue
        take(sys.modules, name, module, f"sys.modules[{name!r}]")  # a module of its own in its place
        for key, value in list(vars(module).items()):
            if key == "_" or (key.startswith("__") and key not in ("__import__", "__build_class__")):
                continue
            take(vars(module), key, value, f"{name}.{key}")
            if isinstance(value, type) and str(getattr(value, "__module__", "")).split(".")[0] == top:
                members(value, f"{name}.{key}")
    if "pytest" in modules:  # the stand-in's classes live in program.py, not in a module "pytest"
        for cls in (_RaisesContext, _Approx):
            members(cls, f"pytest.{cls.__name__}", every=True)
    return taken


_ABSENT = object()


def _changed(taken: list[tuple[object, str, object, str]], callables_only: bool = False) -> str | None:
    """The first attribute of the snapshot that is no longer what it was, by name; None if none.
    ``callables_only``: only functions and classes (after the tests ran, when a module's own state,
    such as ``doctest.master``, has moved on)."""
    moved = [
        label
        for mapping, key, value, label in taken
        if not (callables_only and not callable(value) and key != "__code__")
        and value is not None  # a module's state not yet set (doctest.master)
        and not (isinstance(value, int) and not isinstance(value, bool))  # a counter a module keeps
        and (
            getattr(mapping, key, _ABSENT) if key == "__code__" else mapping.get(key, _ABSENT)  # type: ignore[attr-defined]
        )
        is not value
    ]
    return moved[0] if moved else None
