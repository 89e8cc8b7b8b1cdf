"""Always-equal answers, in the execution harness (stdlib only; Python 3.11; never imported on the host).

:mod:`ptfactory.filters.execution.programs` sends this file's source into the sandbox with the
harness's other files, as one ``program.py``: the names here are that program's globals.

A counterfeit answer is an object whose class says it equals anything: its ``__eq__`` holds
against a fresh object of a class nothing knows (``_Stranger``), which an honest ``__eq__``
(a dataclass's, a namedtuple's, ``Fraction``'s, a class comparing its fields) never does. Such an
object, or a builtin container holding one, is caught three ways:

- every ``==``, ``!=`` and ``in`` of the tests (in asserts or not: ``assertTrue(f(x) == 2)``,
  ``if f(x) == 2:``) is rewritten to a call that is false when it holds only through one (one
  that binds to the first value it meets is tried against a perturbed copy before the tests'
  own ``==`` runs);
- the assertion methods of the tests' ``TestCase`` classes (``assertEqual``, ``assertIn``,
  ``assertCountEqual``, ``assertAlmostEqual``...) fail on one before unittest compares;
- the solution's functions the tests get are watched: one that returns a counterfeit, or a
  number whose arithmetic lies (``abs(f(x) - want)`` always 0: ``_lying``), fails the whole run
  (passed 0), whatever compares it later.

The tests' own wildcards (``mock.ANY``, a class of the tests) may equal anything; a solution's
function may return none of them.
"""

from __future__ import annotations

import _ast

TYPE_CHECKING = False
if TYPE_CHECKING:  # the sandbox runs the files as one program: these names are its globals there
    from collections.abc import Callable
    from typing import Any

    from ptfactory.filters.execution.harness import _bool, _locate, _type
    from ptfactory.filters.execution.harness_numbers import _lying

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
_OWN_FILE = _Stranger.__repr__.__code__.co_filename  # program.py: the harness's (and its stand-ins') file


def _holds(left: object, right: object) -> bool:
    """``left == right`` says true (an ``__eq__`` that raises, or answers ``NotImplemented``, does not)."""
    try:
        said = left == right
        return said is not NotImplemented and _bool(said) is True
    except BaseException:
        return False


def _wildcard(kind: type) -> bool:
    """A class of the tests (their own matcher, ``mock.ANY``) or of the harness (pytest's ``approx``):
    no answer of the solution's, whatever it equals."""
    try:
        code = getattr(kind.__eq__, "__code__", None)
        return vars(kind).get("__module__") == "unittest.mock" or (
            code is not None and code.co_filename in ("tests.py", _OWN_FILE)
        )
    except BaseException:
        return False


def _always_equal(value: object, wildcards: bool) -> bool:
    """``value`` says it equals a ``_Stranger`` (through ``==`` itself, as the tests compare).
    ``wildcards``: the tests' own (``mock.ANY``, a class the tests define) are no counterfeits."""
    kind = _type(value)
    if wildcards and _wildcard(kind):
        return False
    return _holds(value, _Stranger())


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
                # type(), not isinstance: a class that says its __class__ is dict is not one
                if issubclass(_type(item), base):  # the base's iterator: a subclass's own runs nothing here
                    inside = dict.items(item) if base is dict else base.__iter__(item)
                    for inner in inside:
                        budget -= 1
                        if budget <= 0:
                            break
                        todo.append((inner, depth + 1))
                    break
    return False


_NO_COPY = _Stranger()  # what _perturbed gives for a value it has no copy of


def _perturbed(expected: object) -> object:
    """A copy of ``expected`` (a builtin value, by its exact type) changed a little: an honest
    answer equal to ``expected`` is not equal to it too. ``_NO_COPY`` for any other value."""
    kind = _type(expected)
    copy: Any = expected
    if kind is bool:
        return not copy
    if kind is int or kind is complex:
        return copy + 1
    if kind is float:
        if not -float("inf") < copy < float("inf"):  # nan, an infinity
            return 0.5
        return copy * 2 if abs(copy) >= 1 else copy + 1.0
    if kind is str or kind is bytes:
        return copy + ("\0" if kind is str else b"\0")
    if kind is list or kind is tuple:
        return copy + kind((_Stranger(),))
    if kind is dict:
        copy = dict(copy)
        copy[_Stranger()] = _Stranger()
        return copy
    if kind is set or kind is frozenset:
        return copy | {_Stranger()}
    return _Stranger() if copy is None else _NO_COPY


def _perturbations(expected: Any) -> list[object]:
    """``_perturbed(expected)`` and copies changed within its own kind of value (a list of ints
    one int longer, or with its first item changed; a str one letter longer; a dict with one
    value changed): a selective answer that says it equals any list of ints (but no list holding
    a ``_Stranger``) equals one of them too; an honest one equals none."""
    first = _perturbed(expected)
    found = [] if first is _NO_COPY else [first]
    kind = _type(expected)
    if kind is str or kind is bytes:
        found += [expected + expected[:1] * 2 + ("x" if kind is str else b"x"), expected[:-1]]
    elif kind is int:
        found += [-expected - 1, expected * 3 + 7]
    elif kind is float and -float("inf") < expected < float("inf"):
        found.append(-expected - 1.0)
    elif kind is list or kind is tuple:
        items = list(expected)
        if items and _perturbed(items[0]) is not _NO_COPY:
            found.append(kind([_perturbed(items[0]), *items[1:]]))
        found += [kind(items[:-1]), kind([*items, items[-1] if items else 0])]
    elif kind is dict and expected:
        key, value = next(iter(dict.items(expected)))
        if _perturbed(value) is not _NO_COPY:
            found.append({**expected, key: _perturbed(value)})
    if (kind is set or kind is frozenset) and expected:
        found.append(kind(list(expected)[1:]))
    return [copy for copy in found if copy is not _NO_COPY and not (_type(copy) is kind and copy == expected)]


def _dishonest(value: Any, expected: Any, budget: list[int], depth: int = 0) -> bool:
    """``value == expected`` holds, ``expected`` a builtin value, and ``value`` (not a builtin of its
    exact type) equals a perturbed copy of it too (``_perturbed``): a selective always-equal answer,
    whose ``__eq__`` says ``isinstance(other, int)``, however its ``__class__`` reads. The copy is
    tried first, before the tests' own ``==``: an answer that binds to the first value it meets
    (equal to it ever after) binds to the copy. Builtin sequences (a namedtuple, a list subclass)
    and dicts are walked item by item, 4 levels deep, 1,000 items in all."""
    kind, want = _type(value), _type(expected)
    budget[0] -= 1
    if budget[0] < 0 or (kind is want and id(kind) in _PLAIN_IDS):
        return False
    if id(want) not in _PLAIN_IDS and id(want) not in _CONTAINER_IDS:
        return False  # no builtin value to perturb: a class's own == is the tests' business
    if kind is not want and _wildcard(kind):
        return False
    if kind is not want and any(_holds(value, copy) for copy in _perturbations(expected)):
        return _holds(value, expected)
    if depth >= 4:
        return False
    if (want is list or want is tuple) and issubclass(kind, (list, tuple)):
        items = list.__iter__(value) if issubclass(kind, list) else tuple.__iter__(value)
        pairs = zip(items, expected, strict=False)  # its items first: no == of theirs has run yet
        return any(_dishonest(item, other, budget, depth + 1) for item, other in pairs)
    if want is dict and issubclass(kind, dict):
        for key, other in dict.items(expected):
            if dict.__contains__(value, key) and _dishonest(
                dict.__getitem__(value, key), other, budget, depth + 1
            ):
                return True
    return False


def _selective(left: object, right: object) -> bool:
    """``left == right`` holds only through a selective always-equal answer on either side
    (``_dishonest``); its class noted in ``_fakes``: the run is not graded."""
    for value, expected in ((left, right), (right, left)):
        try:
            found = _dishonest(value, expected, [1000])
        except BaseException:  # a container changed while walked: no finding
            found = False
        if found:
            _fakes.append(_type(value).__name__)
            return True
    return False


def _items(container: Any) -> list[object]:
    """The first 1,000 items of a builtin container (or a subclass of one: the base's iterator,
    not its own); none of another value (a generator is not consumed)."""
    kind = _type(container)
    for base in _CONTAINERS:
        if issubclass(kind, base):
            items: list[object] = []
            for item in base.__iter__(container):
                if len(items) >= 1000:
                    break
                items.append(item)
            return items
    return []


def _selective_member(member: object, container: object) -> bool:
    """``member in container`` would hold, for a builtin container (or a subclass of one), only
    through a selective always-equal answer: the member, or an item (``_selective``); tried before
    the tests' own ``in``, as ``_dishonest`` says why."""
    if id(_type(member)) in _PLAIN_IDS:
        return any(
            _type(item) is not _type(member) and _selective(member, item) for item in _items(container)
        )
    return any(item is not member and _selective(member, item) for item in _items(container))


def _ptf_eq(left: object, right: object) -> object:
    """``left == right`` in the tests, false when either side is a counterfeit answer (a selective
    one looked for first, before this ``==`` runs: ``_dishonest``)."""
    plain = id(_type(left)) in _PLAIN_IDS and id(_type(right)) in _PLAIN_IDS
    selective = not plain and _selective(left, right)
    result = left == right
    if selective or (_type(result) is _bool and not result):
        return False if selective else result
    fake = _counterfeit(left) or _counterfeit(right) or _lying(left) or _lying(right)  # vs pytest.approx
    return False if fake else result


def _ptf_ne(left: object, right: object) -> object:
    """``left != right`` in the tests, false when either side is a counterfeit answer."""
    result = left != right
    if _type(result) is _bool and not result:
        return result
    return False if _counterfeit(left) or _counterfeit(right) else result


def _ptf_in(member: object, container: Any) -> object:
    """``member in container`` in the tests, false when either side is or holds a counterfeit."""
    selective = _selective_member(member, container)
    result = member in container
    if result and (selective or _counterfeit(member) or _counterfeit(container)):
        return False
    return result


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


def _checking(method: Callable[..., object], name: str) -> Callable[..., object]:
    """``method`` (an assertion of the tests' ``TestCase``) failing on an always-equal argument,
    and ``assert*Equal`` (``assertIn``, ``assertCountEqual``) on a pair equal only through a
    selective one (``_selective``)."""
    equal = "Equal" in name and "Not" not in name
    member = name == "assertIn"

    def checked(self: object, *args: object, **kwargs: object) -> object:
        values = (*args, *kwargs.values())
        failure = getattr(self, "failureException", AssertionError)
        for value in values:
            if _counterfeit(value) or _lying(value):  # assertAlmostEqual: abs(first - second) said 0
                raise failure(f"an always-equal object (a {_type(value).__name__} that is or holds one)")
        if (equal or member) and len(values) >= 2:
            first, second = values[0], values[1]
            if member:
                found = _selective_member(first, second)
            elif "Count" in name:
                found = any(_selective_member(item, second) for item in _items(first))
            else:
                found = _selective(first, second)
            if found:
                raise failure(f"an always-equal object (a {_fakes[-1]} that is or holds one)")
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
            setattr(cls, name, _checking(method, name))  # type: ignore[arg-type]


_KEPT = ("__name__", "__qualname__", "__doc__", "__module__", "__annotations__")  # as functools.wraps


def _watched(function: Callable[..., object]) -> Callable[..., object]:
    """``function`` (one of the solution's, as the tests get it), noting each counterfeit it
    returns in ``_fakes``; its name, docstring, ``__wrapped__`` (``inspect.signature``) and
    attributes (``cache_clear``) kept."""

    def watched(*args: object, **kwargs: object) -> object:
        value = function(*args, **kwargs)
        if id(_type(value)) not in _PLAIN_IDS and (_counterfeit(value, wildcards=False) or _lying(value)):
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
