"""Always-equal answers, in the execution harness (stdlib only; Python 3.11; never imported on the host).

:mod:`ptfactory.filters.execution.programs` sends this file's source into the sandbox with the
harness's other files, as one ``program.py``: the names here are that program's globals.

A counterfeit answer is an object whose class says it equals anything: its ``__eq__`` holds
against a fresh object of a class nothing knows (``_Stranger``), which an honest ``__eq__``
(a dataclass's, a namedtuple's, ``Fraction``'s, a class comparing its fields) never does. Such an
object, or a builtin container holding one, is caught three ways:

- every ``==``, ``!=`` and ``in`` of the tests (in asserts or not: ``assertTrue(f(x) == 2)``,
  ``if f(x) == 2:``) is rewritten to a call that is false when it holds only through one;
- the assertion methods of the tests' ``TestCase`` classes (``assertEqual``, ``assertIn``,
  ``assertCountEqual``, ``assertAlmostEqual``...) fail on one before unittest compares;
- the solution's functions the tests get are watched: one that returns a counterfeit fails the
  whole run (passed 0), whatever compares it later.

The tests' own wildcards (``mock.ANY``, a class of the tests) may equal anything; a solution's
function may return none of them.
"""

from __future__ import annotations

import _ast

TYPE_CHECKING = False
if TYPE_CHECKING:  # the sandbox runs the files as one program: these names are its globals there
    from collections.abc import Callable
    from typing import Any

    from ptfactory.filters.execution.harness import _bool, _from_tests, _isinstance, _locate, _type

_PLAIN = (int, float, complex, str, bytes, bool, type(None), range)
_CONTAINERS = (list, tuple, set, frozenset, dict)
# by identity: a class is looked up without running a metaclass's __hash__ or __eq__
_PLAIN_IDS = frozenset(id(kind) for kind in _PLAIN)
_CONTAINER_IDS = frozenset(id(kind) for kind in _CONTAINERS)
_fakes: list[str] = []  # the classes of the counterfeits the solution's functions returned


class _Stranger:
    """A fresh object: an honest ``__eq__`` never says it equals one."""

    def __repr__(self) -> str:
        return "<stranger>"


_FUNCTION, _METHOD = type(_Stranger.__repr__), type(_Stranger().__repr__)  # before any solution runs


def _always_equal(value: object, wildcards: bool) -> bool:
    """``value`` says it equals a ``_Stranger`` (through ``==`` itself, as the tests compare).
    ``wildcards``: the tests' own (``mock.ANY``, a class the tests define) are no counterfeits."""
    kind = _type(value)
    try:
        if wildcards and (vars(kind).get("__module__") == "unittest.mock" or _from_tests(kind.__eq__)):
            return False
        said = value == _Stranger()
        return said is not NotImplemented and _bool(said) is True
    except BaseException:  # an __eq__ that raises on a stranger is an honest one
        return False


def _counterfeit(value: object, wildcards: bool = True) -> bool:
    """``value`` is, or holds (a builtin container, a subclass of one, 4 levels deep, 1,000 items
    in all), an object whose class says it equals anything: an answer made to pass every ``==``."""
    todo: list[tuple[Any, int]] = [(value, 0)]
    budget = 1000
    while todo and budget > 0:
        item, depth = todo.pop()
        kind = id(_type(item))
        if kind in _PLAIN_IDS:
            continue
        if kind not in _CONTAINER_IDS and _always_equal(item, wildcards):
            return True
        if depth < 4:
            for base in _CONTAINERS:
                if _isinstance(item, base):  # the base's iterator: a subclass's own runs nothing here
                    inside = dict.items(item) if base is dict else base.__iter__(item)
                    for inner in inside:
                        budget -= 1
                        if budget <= 0:
                            break
                        todo.append((inner, depth + 1))
                    break
    return False


def _ptf_eq(left: object, right: object) -> object:
    """``left == right`` in the tests, false when either side is a counterfeit answer."""
    result = left == right
    if _type(result) is _bool and not result:
        return result
    return False if _counterfeit(left) or _counterfeit(right) else result


def _ptf_ne(left: object, right: object) -> object:
    """``left != right`` in the tests, false when either side is a counterfeit answer."""
    result = left != right
    if _type(result) is _bool and not result:
        return result
    return False if _counterfeit(left) or _counterfeit(right) else result


def _ptf_in(member: object, container: Any) -> object:
    """``member in container`` in the tests, false when either side is or holds a counterfeit."""
    result = member in container
    return False if result and (_counterfeit(member) or _counterfeit(container)) else result


_HONEST = {_ast.Eq: "_ptf_eq", _ast.NotEq: "_ptf_ne", _ast.In: "_ptf_in"}


def _honest_comparisons(node: _ast.AST) -> _ast.AST:
    """Every ``a == b``, ``a != b`` and ``a in b`` (one operator) below ``node`` becomes
    ``_ptf_eq(a, b)`` (``_ptf_ne``, ``_ptf_in``), in place; the node that takes ``node``'s place."""
    if isinstance(node, _ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _HONEST:
        call = _ast.Call(
            _ast.Name(_HONEST[type(node.ops[0])], _ast.Load()), [node.left, node.comparators[0]], []
        )
        _locate(call, node)
        node = call
    for field in node._fields:
        value = getattr(node, field, None)
        if isinstance(value, list):
            setattr(node, field, [_honest_comparisons(v) if isinstance(v, _ast.AST) else v for v in value])
        elif isinstance(value, _ast.AST):
            setattr(node, field, _honest_comparisons(value))
    return node


def _checking(method: Callable[..., object]) -> Callable[..., object]:
    def checked(self: object, *args: object, **kwargs: object) -> object:
        for value in (*args, *kwargs.values()):
            if _counterfeit(value):
                failure = getattr(self, "failureException", AssertionError)
                raise failure(f"an always-equal object (a {_type(value).__name__} that is or holds one)")
        return method(self, *args, **kwargs)

    checked._ptf_honest = True  # type: ignore[attr-defined]
    return checked


def _honest_asserts(cls: type) -> None:
    """The ``assert*`` methods of a ``TestCase`` class of the tests fail on a counterfeit argument
    (unittest's own ``==`` is out of the rewrite's reach); set on the tests' class, never on
    ``unittest.TestCase`` (the snapshot guards it)."""
    for name in dir(cls):
        method = getattr(cls, name, None)
        if (
            name.startswith(("assert", "fail"))
            and _type(method) is _FUNCTION
            and not getattr(method, "_ptf_honest", False)
        ):
            setattr(cls, name, _checking(method))  # type: ignore[arg-type]


_KEPT = ("__name__", "__qualname__", "__doc__", "__module__", "__annotations__")  # as functools.wraps


def _watched(function: Callable[..., object]) -> Callable[..., object]:
    """``function`` (one of the solution's, as the tests get it), noting each counterfeit it
    returns in ``_fakes``; its name, docstring, ``__wrapped__`` (``inspect.signature``) and
    attributes (``cache_clear``) kept."""

    def watched(*args: object, **kwargs: object) -> object:
        value = function(*args, **kwargs)
        if id(_type(value)) not in _PLAIN_IDS and _counterfeit(value, wildcards=False):
            _fakes.append(_type(value).__name__)
        return value

    for name in dir(function):
        if not name.startswith("__") or name in _KEPT:
            try:
                setattr(watched, name, getattr(function, name))
            except BaseException:  # an attribute that cannot be read or set stays the wrapper's
                pass
    watched.__wrapped__ = function  # type: ignore[attr-defined]
    return watched


def _watch(namespace: dict[str, object]) -> None:
    """The solution's functions in ``namespace`` (the tests' names; its entry point bound as a
    method too, and ``functools.cache`` ones) replaced by watched ones. The solution's own calls
    go through its module, unwatched: no extra frame in its recursion."""
    for name, value in list(namespace.items()):
        kind = _type(value)
        if (
            kind is _FUNCTION
            or kind is _METHOD
            or (kind.__name__ == "_lru_cache_wrapper" and callable(value))
        ):
            namespace[name] = _watched(value)  # type: ignore[arg-type]
