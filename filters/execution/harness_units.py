"""How the execution harness reads the tests and prepares the solution (stdlib only; Python 3.11;
never imported on the host).

:mod:`ptfactory.filters.execution.programs` sends this file's source into the sandbox ahead of
``harness.py``'s, as one ``program.py``: the names here are that program's globals. What it holds:
the tests read (fenced ones, a doctest transcript; their ``unittest.main()`` left out; HumanEval's
``check``; the modules they import; their doctest examples counted) and the solution prepared: its
stdin demo and the lines that use what it read left out, LeetCode's typing names given, the names
it hands the tests (none that shadows a builtin, no dunder), a module the tests import the entry
point from that does not exist. The tests' units run in ``harness_xunit.py``.
"""

from __future__ import annotations

import _ast
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # the sandbox runs the files as one program: these names are its globals there
    from ptfactory.filters.execution.harness import _ptf_count, _Raised
    from ptfactory.filters.execution.harness_xunit import _unrunnable

# third-party packages a reply may reasonably import that the sandbox image lacks: a run that
# fails on one of these abstains (an environment limit), a made-up name still fails
_PACKAGES = (
    "numpy pandas scipy sympy sklearn torch tensorflow jax networkx requests matplotlib PIL cv2 bs4 "
    "yaml regex sortedcontainers more_itertools attr attrs pydantic numba polars pyarrow tqdm "
    "dateutil pytz statsmodels seaborn skimage z3 gmpy2 mpmath hypothesis typing_extensions"
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
    kept: list[_ast.stmt] = []
    lost: set[str] = set()  # names bound only by a statement left out
    for node in tree.body:
        stored = _stored(node)
        if isinstance(node, defines):
            lost -= stored
        elif _reads_stdin(node, readers) or any(
            isinstance(n, _ast.Name) and isinstance(n.ctx, _ast.Load) and n.id in lost for n in _nodes(node)
        ):  # reads stdin, or uses what such a line read (`print(solve(arr))`): left out too
            lost |= stored
            continue
        else:
            lost -= stored
        kept.append(node)
    tree.body = kept
    return tree


def _stored(node: _ast.AST) -> set[str]:
    """The names a top-level statement binds (a definition's, an import's, an assignment's targets)."""
    if isinstance(node, _ast.FunctionDef | _ast.AsyncFunctionDef | _ast.ClassDef):
        return {node.name}
    if isinstance(node, _ast.Import | _ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    return {n.id for n in _nodes(node) if isinstance(n, _ast.Name) and isinstance(n.ctx, _ast.Store)}


def _tests_tree(tests: str) -> tuple[_ast.Module, str]:
    """The tests parsed, and their text. Tests that do not parse are read as what they hold: the
    code of their fences (```python ... ```, prose around it left out, the lines kept in place), a
    doctest transcript (``>>> add(2, 3)`` then ``5``) run as doctest examples. Tests that still do
    not parse are not the reply's fault: the run abstains (``unsupported:tests_invalid``)."""
    texts = [tests]
    lines = tests.splitlines()
    if any(line.strip().startswith("```") for line in lines):
        inside, code = False, []
        for line in lines:
            fence = line.strip().startswith("```")
            inside = not inside if fence else inside
            code.append(line if inside and not fence else "")
        texts.append("\n".join(code) + "\n")
    if any(line.lstrip().startswith(">>>") for line in texts[-1].splitlines()):
        transcript = "\n".join(line.strip() for line in texts[-1].splitlines())
        texts.append(
            f"import doctest\ndoctest.run_docstring_examples({transcript!r}, globals(), name='tests')\n"
        )
    error: SyntaxError | None = None
    for text in texts:
        try:
            tree = compile(text, "tests.py", "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as exc:
            error = error or exc
            continue
        if not isinstance(tree, _ast.Module):  # what "exec" mode always parses to
            raise TypeError(f"tests parsed to {type(tree).__name__}")
        return tree, text
    _unrunnable.append("tests_invalid")
    raise error or SyntaxError("the tests do not parse")


# typing's names LeetCode's stubs use without importing them (LeetCode imports typing for them)
_TYPING = frozenset(
    {
        "List", "Dict", "Set", "FrozenSet", "Tuple", "Optional", "Union", "Any", "Callable", "Iterable",
        "Iterator", "Generator", "Sequence", "Mapping", "MutableMapping", "Deque", "DefaultDict",
        "OrderedDict", "Type",
    }
)  # fmt: skip


def _stand_in_modules(tree: _ast.Module, namespace: dict[str, object], entry_point: str | None) -> None:
    """A module the tests import the entry point from that does not exist (``from add_module import
    add``: tests written for a file of the task's name) is the solution's names the tests get,
    under that name; only when every name imported is the solution's, imported as itself (``add
    as ref`` may be a reference implementation)."""
    for node in _nodes(tree):
        if not isinstance(node, _ast.ImportFrom) or node.level or not node.module or "." in node.module:
            continue
        names = [(alias.name, alias.asname) for alias in node.names]
        if node.module in sys.modules or entry_point not in [name for name, _ in names]:
            continue
        if all(asname in (None, name) and name in namespace for name, asname in names):
            stand_in = type(sys)(node.module)
            stand_in.__dict__.update({name: namespace[name] for name, _ in names})
            sys.modules[node.module] = stand_in


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
