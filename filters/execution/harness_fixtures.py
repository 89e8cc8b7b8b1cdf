"""pytest's own fixtures in the execution harness (stdlib only; Python 3.11; never imported on the host).

:mod:`ptfactory.filters.execution.programs` sends this file's source into the sandbox with the
harness's other files, as one ``program.py``: the names here are that program's globals.

A pytest-style test that takes ``capsys`` (or ``capfd``, read the same way: what Python code
prints), ``tmp_path`` or ``monkeypatch`` gets a stand-in with their common methods, fresh for each
call and undone after it. The tests' own ``@pytest.fixture`` functions (``autouse``, ``yield``
ones, a scope wider than a function made once; not ``params``) are given the same way, in their
module or their test class. A test that takes another fixture (``request``, ``caplog``)
abstains (``harness_xunit.py``).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # the sandbox runs the files as one program: these names are its globals there
    from ptfactory.filters.execution.harness import _type
    from ptfactory.filters.execution.harness_honest import _FUNCTION
    from ptfactory.filters.execution.harness_xunit import _left_out, _ours, _underlying

_FIXTURES = frozenset({"capsys", "capfd", "tmp_path", "monkeypatch"})
_NOTSET = object()


class _Captured(tuple):  # type: ignore[type-arg]
    """``capsys.readouterr()``: ``(out, err)``, also as ``.out`` and ``.err``."""

    @property
    def out(self) -> str:
        return str(self[0])

    @property
    def err(self) -> str:
        return str(self[1])


class _Capsys:
    """``capsys``: ``sys.stdout`` and ``sys.stderr`` written to memory while the test runs;
    ``readouterr()`` gives what was written since the last call."""

    def __init__(self) -> None:
        import io

        self._saved = sys.stdout, sys.stderr
        self._out, self._err = io.StringIO(), io.StringIO()
        sys.stdout, sys.stderr = self._out, self._err

    def readouterr(self) -> _Captured:
        taken = _Captured((self._out.getvalue(), self._err.getvalue()))
        for stream in (self._out, self._err):
            stream.seek(0)
            stream.truncate()
        return taken

    def _ptf_undo(self) -> None:
        sys.stdout, sys.stderr = self._saved


def _target(path: str) -> object:
    """``"os.path"`` → the object (a module, or an attribute of one), importing as it goes."""
    parts = path.split(".")
    found: object = __import__(parts[0])
    for index, part in enumerate(parts[1:], start=2):
        try:
            found = getattr(found, part)
        except AttributeError:
            __import__(".".join(parts[:index]))
            found = getattr(found, part)
    return found


class _MonkeyPatch:
    """``monkeypatch``: ``setattr`` (``(obj, name, value)`` or ``("module.name", value)``),
    ``delattr``, ``setitem``, ``delitem``, ``setenv``, ``delenv``, ``chdir``, ``syspath_prepend``;
    all undone after the test."""

    def __init__(self) -> None:
        self._undo: list[object] = []

    def _keep(self, target: object, name: str) -> None:
        old = vars(target).get(name, _NOTSET) if isinstance(target, type) else getattr(target, name, _NOTSET)
        self._undo.append(lambda: delattr(target, name) if old is _NOTSET else setattr(target, name, old))

    def setattr(self, target: object, name: object, value: object = _NOTSET, raising: bool = True) -> None:
        if value is _NOTSET:  # ("module.name", value)
            path, _, attr = str(target).rpartition(".")
            target, name, value = _target(path), attr, name
        if raising and not hasattr(target, str(name)):
            raise AttributeError(f"{target!r} has no attribute {name!r}")
        self._keep(target, str(name))
        setattr(target, str(name), value)

    def delattr(self, target: object, name: object = _NOTSET, raising: bool = True) -> None:
        if name is _NOTSET:
            path, _, attr = str(target).rpartition(".")
            target, name = _target(path), attr
        if not hasattr(target, str(name)):
            if raising:
                raise AttributeError(str(name))
            return
        self._keep(target, str(name))
        delattr(target, str(name))

    def setitem(self, mapping: dict[object, object], key: object, value: object) -> None:
        old = mapping.get(key, _NOTSET)
        self._undo.append(lambda: mapping.pop(key, None) if old is _NOTSET else mapping.__setitem__(key, old))
        mapping[key] = value

    def delitem(self, mapping: dict[object, object], key: object, raising: bool = True) -> None:
        if key not in mapping:
            if raising:
                raise KeyError(key)
            return
        old = mapping[key]
        self._undo.append(lambda: mapping.__setitem__(key, old))
        del mapping[key]

    def setenv(self, name: str, value: object, prepend: str | None = None) -> None:
        text = str(value)
        if prepend and name in os.environ:
            text = text + prepend + os.environ[name]
        self.setitem(os.environ, name, text)  # type: ignore[arg-type]

    def delenv(self, name: str, raising: bool = True) -> None:
        self.delitem(os.environ, name, raising)  # type: ignore[arg-type]

    def chdir(self, path: object) -> None:
        old = os.getcwd()
        self._undo.append(lambda: os.chdir(old))
        os.chdir(str(path))

    def syspath_prepend(self, path: object) -> None:
        sys.path.insert(0, str(path))
        self._undo.append(lambda: sys.path.remove(str(path)) if str(path) in sys.path else None)

    def _ptf_undo(self) -> None:
        while self._undo:
            self._undo.pop()()  # type: ignore[operator]


def _fixture(name: str) -> object:
    """A fresh stand-in for one of pytest's own fixtures (``_FIXTURES``)."""
    if name in ("capsys", "capfd"):
        return _Capsys()
    if name == "monkeypatch":
        return _MonkeyPatch()
    import pathlib
    import tempfile

    try:
        return pathlib.Path(tempfile.mkdtemp(prefix="tmp_path_", dir=os.getcwd()))
    except OSError:  # a working directory the job may not write to
        return pathlib.Path(tempfile.mkdtemp(prefix="tmp_path_"))


def _with_fixtures(
    function: object,
    arguments: dict[str, object],
    requested: list[str],
    available: dict[str, tuple[object, str, bool, str, bool]],
    instance: object = None,
) -> None:
    """Call the tests' ``function`` with ``arguments`` and the ``requested`` fixtures, fresh (the
    autouse ones of ``available`` made first), undone after."""
    made: dict[str, object] = {}
    undo: list[object] = []
    try:
        for name in [*_autouse(available), *requested]:
            _make(name, available, instance, made, undo)
        function(**arguments, **{name: made[name] for name in requested})  # type: ignore[operator]
    finally:
        while undo:
            undo.pop()()  # type: ignore[operator]


def _fixture_mark(
    function: object = None,
    *,
    scope: str = "function",
    params: object = None,
    autouse: bool = False,
    ids: object = None,
    name: str | None = None,
) -> object:
    """``@pytest.fixture`` / ``@pytest.fixture(autouse=True, scope=..., name=...)``: the function is
    one of the tests' fixtures (one with ``params`` is not given: its tests abstain)."""

    def mark(target: object) -> object:
        label = name or str(getattr(target, "__name__", ""))
        target._ptf_fixture = (label, autouse, scope, params is not None)  # type: ignore[attr-defined]
        return target

    return mark(function) if callable(function) else mark


def _fixtures_of(values: dict[str, object], method: bool) -> dict[str, tuple[object, str, bool, str, bool]]:
    """The tests' own fixtures among ``values`` (their module's names, a class's):
    name → (function, attribute, autouse, scope, a method)."""
    found: dict[str, tuple[object, str, bool, str, bool]] = {}
    for attr, value in list(values.items()):
        mark = getattr(value, "_ptf_fixture", None) if _type(value) is _FUNCTION and _ours(value) else None
        if isinstance(mark, tuple) and len(mark) == 4 and not mark[3]:
            found[str(mark[0])] = (value, attr, bool(mark[1]), str(mark[2]), method)
    return found


def _autouse(available: dict[str, tuple[object, str, bool, str, bool]]) -> list[str]:
    return [name for name, (_, _, autouse, _, _) in available.items() if autouse]


def _unknown(
    names: list[str], available: dict[str, tuple[object, str, bool, str, bool]], depth: int = 0
) -> str:
    """The first of ``names`` (or of the fixtures they need, on down) the harness cannot give;
    empty when it can give them all."""
    for name in names:
        if name in _FIXTURES:
            continue
        if name not in available or depth > 8:
            return name
        function, _, _, _, method = available[name]
        needs = _left_out(function, method, {})
        deeper = f"{name}:async" if needs is None else _unknown(needs, available, depth + 1)
        if deeper:
            return deeper
    return ""


_SCOPED: dict[str, object] = {}  # what a fixture wider than a function (scope="module") gave


def _make(
    name: str,
    available: dict[str, tuple[object, str, bool, str, bool]],
    instance: object,
    made: dict[str, object],
    undo: list[object],
) -> None:
    """Give ``made[name]``: pytest's own fixture, or the tests' (its own fixtures first; a
    ``yield`` fixture's rest runs at ``undo``)."""
    if name in made:
        return
    if name in _FIXTURES:
        made[name] = _fixture(name)
        step = getattr(made[name], "_ptf_undo", None)
        if step is not None:
            undo.append(step)
        return
    function, attr, _, scope, method = available[name]
    if scope != "function" and name in _SCOPED:
        made[name] = _SCOPED[name]
        return
    needs = _left_out(function, method, {}) or []
    for need in needs:
        _make(need, available, instance, made, undo)
    target = getattr(instance, attr) if method else function
    value = target(**{need: made[need] for need in needs})  # type: ignore[operator]
    code = getattr(_underlying(function), "__code__", None)
    if code is not None and code.co_flags & 0x20:  # CO_GENERATOR: a yield fixture
        generator = value
        value = next(generator)
        if scope == "function":
            undo.append(lambda: next(generator, None))
    if scope != "function":
        _SCOPED[name] = value
    made[name] = value
