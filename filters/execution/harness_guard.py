"""The tests' own namespace, guarded from the solution (stdlib only; Python 3.11; never imported
on the host).

:mod:`ptfactory.filters.execution.programs` sends this file's source into the sandbox with the
harness's other files, as one ``program.py``: the names here are that program's globals.

The tests run as a module ``__main__`` the solution can reach (``sys.modules["__main__"]``), and
its functions run while they do. What it could change there to pass is guarded:

- what it put into that module while it loaded (a ``__builtins__`` of its own, whose
  ``__import__`` hands the tests a lenient ``unittest``) is dropped before the tests run, and the
  module is ``sys.modules["__main__"]`` again (``_fresh_main``);
- the names the harness binds there (``_ptf_count``, ``_ptf_eq``..., ``__builtins__``) are checked
  at every counted assertion (``_rebound``): a solution that wraps the counter to count a failed
  assertion as held is caught at the next one;
- the tests' own functions (their ``__code__``) and classes (their methods, the ``assert*`` methods
  of their ``TestCase`` classes made honest first), the names of their module (a tolerance ``EPS``
  rebound, ``abs`` shadowed) and the items of their own lists, dicts and sets (the cases a test
  loops over, rewritten or emptied) are taken once the tests are defined and checked when the run
  ends (``_moved``): a solution that makes ``assertEqual`` a no-op on the tests' class while a
  test runs is caught. What the tests change themselves (``global N``, ``N.append``, ``N[k] = v``)
  or hand to a call (a solution may sort its argument in place) is left out (``_open_names``).
"""

from __future__ import annotations

import _ast

TYPE_CHECKING = False
if TYPE_CHECKING:  # the sandbox runs the files as one program: these names are its globals there
    from typing import Any

    from ptfactory.filters.execution.harness import _BUILTIN_NAMES, _from_tests
    from ptfactory.filters.execution.harness_honest import _honest_asserts
    from ptfactory.filters.execution.harness_units import _is_test_case, _nodes

_bound: list[tuple[dict[str, object], str, object]] = []  # the harness's names in the tests' namespace
_taken: list[tuple[object, str, object, str]] = []  # (owner, key, value, label) of the tests' own
_new_keys: list[tuple[type, frozenset[str]]] = []  # a class of the tests and the names it had
_rebinding: list[str] = []  # a harness name the solution rebound while the tests ran
_open: set[str] = set()  # the tests' globals their own code rebinds or changes (``_open_names``)
_globals: list[tuple[dict[str, object], dict[str, object]]] = []  # the tests' namespace, its names then
_data: list[tuple[str, object, list[object] | set[object]]] = []  # the tests' own containers, items then
# what changes a container in place; builtins that only read the one they are given
_MUTATORS = frozenset((
    "append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "update", "setdefault",
    "popitem", "add", "discard",
))  # fmt: skip
_READERS = frozenset((
    "enumerate", "zip", "len", "list", "tuple", "sorted", "reversed", "iter", "min", "max", "sum", "any",
    "all", "set", "print",
))  # fmt: skip
_GONE = object()  # a name no longer there
# a name a solution would add to a class of the tests to change what its tests do
_RUNNING = ("assert", "fail", "test", "setUp", "tearDown", "run", "debug", "__call__", "__getattr")


def _fresh_main(main: object, namespace: dict[str, object], before: dict[str, object]) -> None:
    """Undo what the solution did to the tests' module while it loaded: its names as they were
    (``before``), none it added, and ``sys.modules["__main__"]`` that module again."""
    import sys

    namespace.clear()
    namespace.update(before)
    sys.modules["__main__"] = main  # type: ignore[assignment]


def _bind(namespace: dict[str, object], names: tuple[str, ...]) -> None:
    """Remember the harness's ``names`` as bound in ``namespace`` now (checked by ``_rebound``)."""
    for name in names:
        _bound.append((namespace, name, namespace[name]))


def _rebound() -> bool:
    """A harness name of the tests' namespace is no longer the harness's own; noted once."""
    for namespace, name, value in _bound:
        if namespace.get(name) is not value:
            if not _rebinding:
                _rebinding.append(f"the tests' {name}")
            return True
    return False


def _open_names(tree: _ast.Module) -> None:
    """Note the globals the tests change themselves (``global N``, ``N.append(...)``, ``N[k] = v``)
    or hand to a call that may change them (a solution sorting its argument in place): the rest of
    their module-level names and data are theirs alone (``_moved``). Before the tests' rewrite."""
    for node in _nodes(tree):
        if isinstance(node, _ast.Global):
            _open.update(node.names)
        elif isinstance(node, _ast.AugAssign) and isinstance(node.target, _ast.Name):
            _open.add(node.target.id)
        elif isinstance(node, _ast.Subscript) and not isinstance(node.ctx, _ast.Load):
            if isinstance(node.value, _ast.Name):
                _open.add(node.value.id)
        elif isinstance(node, _ast.Call):
            function = node.func
            if (
                isinstance(function, _ast.Attribute)
                and isinstance(function.value, _ast.Name)
                and function.attr in _MUTATORS
            ):
                _open.add(function.value.id)
            if not (isinstance(function, _ast.Name) and function.id in _READERS):
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    inner = arg.value if isinstance(arg, _ast.Starred) else arg
                    if isinstance(inner, _ast.Name):
                        _open.add(inner.id)


def _take(owner: object, key: str, value: object, label: str) -> None:
    _taken.append((owner, key, value, label))
    code = getattr(value, "__code__", None)
    if code is not None and type(value).__name__ == "function":
        _taken.append((value, "__code__", code, f"{label}.__code__"))


def _guard_tests(namespace: dict[str, object], before: dict[str, object]) -> None:
    """Once the tests are defined: their functions and classes (the ``assert*`` methods of their
    ``TestCase`` classes made honest first, ``_honest_asserts``), the names of their namespace and
    the items of their own lists, dicts and sets (``before``: the namespace before they ran), as
    ``_moved`` checks them."""
    _globals.append((namespace, {k: v for k, v in namespace.items() if not k.startswith("__")}))
    for name, value in list(namespace.items()):
        kind = type(value)
        if (
            (kind is list or kind is dict or kind is set)
            and name not in _open
            and before.get(name) is not value
        ):
            _data.append((name, value, _items_of(value)))
        if name in _open:  # the tests rebind it themselves (``global``)
            continue
        if type(value).__name__ == "function" and _from_tests(value):
            _take(namespace, name, value, name)
        elif isinstance(value, type) and (
            _is_test_case(value) or any(_from_tests(v) for v in vars(value).values())
        ):
            if _is_test_case(value):
                _honest_asserts(value)
            _take(namespace, name, value, name)
            for attr, member in list(vars(value).items()):
                if callable(member) or isinstance(member, staticmethod | classmethod | property):
                    _take(value, attr, member, f"{name}.{attr}")
            _new_keys.append((value, frozenset(vars(value))))


def _moved() -> str | None:
    """What of the tests' own is no longer as ``_guard_tests`` took it (or a harness name rebound
    while they ran, ``_rebound``); None if nothing."""
    if _rebinding or _rebound():
        return _rebinding[0]
    for owner, key, value, label in _taken:
        now = getattr(owner, key, None) if key == "__code__" else _member(owner, key)
        if now is not value:
            return f"the tests' {label}"
    for namespace, names in _globals:  # a tests' global rebound, a builtin shadowed (``abs``)
        for key, value in names.items():
            if key not in _open and namespace.get(key, _GONE) is not value:
                return f"the tests' {key}"
        for key in list(namespace):
            if key in _BUILTIN_NAMES and key not in names and key not in _open and not key.startswith("__"):
                return f"the tests' {key}"
    for name, container, items in _data:
        if not _same(_items_of(container), items):
            return f"the tests' {name}"
    for cls, keys in _new_keys:
        for key, member in list(vars(cls).items()):  # unittest's own (tearDown_exceptions) are no callables
            if key not in keys and key.startswith(_RUNNING) and callable(member):
                return f"the tests' {cls.__name__}.{key}"
    return None  # nothing moved (tests/filters/test_execution.py reads a bare one as a mutant)


def _member(owner: object, key: str) -> object:
    """``owner[key]`` for a namespace, else the class's own attribute (not an inherited one)."""
    if isinstance(owner, dict):
        return owner.get(key)
    return vars(owner).get(key)


def _items_of(container: Any) -> list[object] | set[object]:
    """What a list holds (by identity), a dict's keys and values (by identity, in turn), a set's copy."""
    if type(container) is dict:
        return [part for pair in dict.items(container) for part in pair]
    return list.copy(container) if type(container) is list else set.copy(container)


def _same(now: list[object] | set[object], then: list[object] | set[object]) -> bool:
    if isinstance(then, set):
        return now == then
    return len(now) == len(then) and all(a is b for a, b in zip(now, then, strict=False))
