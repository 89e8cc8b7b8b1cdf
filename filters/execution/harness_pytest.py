"""The pytest stand-in of the execution harness (stdlib only; Python 3.11; never imported on the
host): the sandbox image has no pytest, so tests that ``import pytest`` get a module with ``raises``
(a context, or ``raises(E, func, *args)``) and ``approx`` (numbers, sequences, dicts; pytest's
tolerance rules). :mod:`ptfactory.filters.execution.programs` sends this file's source into the
sandbox with ``harness_units.py`` and ``harness.py`` as one ``program.py``."""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # the sandbox runs the files as one program: these names are its globals there
    from ptfactory.filters.execution.harness import _ptf_count


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


def _pytest_shim() -> None:
    """A ``pytest`` module with ``raises`` and ``approx`` where pytest is not installed (the
    sandbox image has none), so pytest-style tests that use them run instead of failing on the
    import; tests that need more of pytest (fixtures, marks) fail as before."""
    try:
        import pytest  # noqa: F401  # a real one wins
    except ImportError:
        module = type(sys)("pytest")
        module.raises = _raises  # type: ignore[attr-defined]
        module.approx = _Approx  # type: ignore[attr-defined]
        sys.modules["pytest"] = module
