"""The test harness that runs inside the sandbox and counts assertions (stdlib only; Python 3.11).

Its code never runs on the host: :func:`ptfactory.filters.execution.programs.program` sends
``harness_pytest.py``, ``harness_units.py`` and this file's source, followed by one ``run(solution, tests, entry_point,
nonce)`` call, as the job's ``program.py``. Parsing and rewriting the tests happens here, inside
the sandbox, because the tests are model output too.

Each ``assert test, msg`` of the tests becomes a counted check: an exception or a false value
counts as a failed assertion and the run goes on (HumanEval's ``check`` would stop at the first);
an assert inside ``with pytest.raises(...)`` or a ``try`` with handlers lets its exception go on to
them. The last line written is ``ASSERTIONS_MARK nonce passed total [why]``, ``nonce`` the host's
for this run (``programs.graded`` reads no other line); the exit code is 0 only when at least one
assertion ran and every one held.

Tests come in these shapes: HumanEval's ``check(candidate)`` (called with the entry point when the
tests define it with one parameter and never call it themselves), MBPP's top-level asserts,
pytest-style ``test*`` functions and ``class Test*`` methods (one that raises fails once, at its
line; the xunit hooks, defaults, ``mock.patch`` decorators and parametrize as pytest has them:
``harness_xunit.py``; pytest's ``capsys``, ``tmp_path``, ``monkeypatch`` and the tests' own fixtures
given: ``harness_fixtures.py``; one the harness cannot call, another fixture's argument, abstains
unless another test failed), ``unittest.TestCase`` classes (each test method one assertion; ``unittest.main()`` calls
are left out) and doctest examples (each one assertion). Tests that only define what nothing
calls fail with "no test ran"; tests that run but check nothing report ``no_assertions``. Tests
that do not parse are read as their fences' code or as a doctest transcript, else abstain
(``unsupported:tests_invalid``).

The solution loads as the module ``solution`` (its ``if __name__ == "__main__":`` block does not
run; tests may ``from solution import f``), less its top-level statements that read stdin
(``input()``, ``sys.stdin``, ``open(0)``) or call a function of its own that does (no input here),
and the later ones that use what those read,
with the typing names LeetCode's stubs use unimported (``List``, ``Optional``) given first. The
tests get its names less dunders (``__builtins__``) and those that shadow a builtin (a solution's
``abs`` or ``set``), the entry point excepted. An entry point defined only as a method of a
solution's class is called on an instance. The sandbox has no pytest: pytest-style tests get a
stand-in module with ``raises``, ``approx``, ``param``, ``mark.parametrize`` (one test per
parameter set) and ``fixture``, the solution's own ``import pytest`` too; another pytest feature
(``mark.skip``) abstains (``unsupported:pytest.NAME``).

Against a solution that games the count: program.py is deleted before the solution loads (it
cannot read the tests or the nonce), the harness binds what it uses first, the tests run as a
fresh ``__main__``, and a snapshot of ``builtins`` and of the modules the tests import (their
classes, the functions' ``__code__``, the pytest stand-in's classes) fails a solution that rebinds
one (``math.isclose``, ``TestCase.assertFalse``, ``approx.__eq__``, the module in ``sys.modules``);
what the tests assign themselves (``builtins.input = ...``) is left out of it. The tests' own
module is guarded too (``harness_guard.py``): what the solution put there while it loaded is
dropped, and one that rebinds the harness's counter there, a name or a builtin the tests use
(``EPS``, ``abs``), their functions, their classes' methods or the cases they loop over while
they run is caught. An always-equal answer (an object whose
``__eq__`` holds against anything) fails every ``==``, ``!=`` and ``in`` of the tests and the
assertions of their TestCases, and one returned by the solution's functions fails the run
(``harness_honest.py``); so does a number whose ``__sub__`` says 0 where the tests check
``abs(f(x) - want) < tol`` (``harness_numbers.py``). The
solution still runs in this process: the sandbox bounds what code can do, not its honesty.
"""

from __future__ import annotations

# Only built-in modules: every job starts a fresh interpreter, and `ast` and `typing` (what this
# file used before) were about 15 ms of CPU per job, half of a typical job's cost in the sandbox.
import _ast
import builtins
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # the sandbox runs the files as one program: these names are its globals there
    from ptfactory.filters.execution.harness_guard import (
        _bind,
        _bound,
        _fresh_main,
        _guard_tests,
        _moved,
        _open_names,
        _rebound,
    )
    from ptfactory.filters.execution.harness_honest import (
        _fakes,
        _honest_comparisons,
        _ptf_eq,
        _ptf_in,
        _ptf_ne,
        _watch,
    )
    from ptfactory.filters.execution.harness_numbers import _checked_subtractions, _ptf_sub
    from ptfactory.filters.execution.harness_pytest import (
        _changed,
        _mention,
        _pytest_shim,
        _snapshot,
        _unsupported,
    )
    from ptfactory.filters.execution.harness_units import (
        _assigned,
        _count_doctests,
        _forget_program,
        _humaneval_check,
        _imported,
        _method_entry,
        _missing,
        _note_missing,
        _own_names,
        _preload,
        _stand_in_modules,
        _tests_tree,
        _typing_names,
        _without_runners,
        _without_stdin_demo,
    )
    from ptfactory.filters.execution.harness_xunit import _run_units, _unrunnable

ASSERTIONS_MARK = "@ptf-assertions"

_counts = [0, 0]  # passed, evaluated
# taken before any untrusted code runs: a solution that rebinds builtins.bool, print or os._exit
# changes nothing here
_write, _leave, _bool, _isinstance, _type = os.write, os._exit, bool, isinstance, type
_BUILTIN_NAMES = frozenset(vars(builtins))


class _Raised:
    """What an assert's test evaluated to when evaluating it raised."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def _ptf_raised() -> _Raised:
    return _Raised(sys.exc_info()[1])


def _ptf_count(value: object, line: int) -> None:
    """Called in place of each assert, with the test's value (or a _Raised)."""
    why = "assertion failed"
    held: object = False
    if _isinstance(value, _Raised):
        error = value.error  # type: ignore[attr-defined]
        _note_missing(error)
        why = f"raised {_type(error).__name__}"
        try:
            why += f": {error}"[:300]
        except BaseException:  # an exception whose str() raises still counts as one failed assert
            pass
    else:
        try:
            held = _bool(value) if _type(value) is not _bool else value
        except BaseException:  # a __bool__ that raises is a failed assertion, not a crash
            held = False
    if _bound:  # a solution that wrapped the counter itself: caught at the next assertion
        _rebound()
    _counts[0] += 1 if held is True else 0
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


def _counted(node: _ast.Assert, expecting: bool) -> list[_ast.stmt]:
    """``assert test, msg`` → ``try: _ptf_ok = test / except BaseException: _ptf_ok = _ptf_raised()``
    then ``_ptf_count(_ptf_ok, line)``. BaseException: a candidate calling ``sys.exit`` fails that
    assert only. ``expecting``: the assert sits where the tests expect an exception (a
    ``with pytest.raises(...)`` block, the body of a ``try`` with handlers): the exception goes on
    to them, unguarded. The names start with one underscore: two would be mangled inside a class."""

    def store(value: _ast.expr) -> _ast.Assign:
        return _ast.Assign([_ast.Name("_ptf_ok", _ast.Store())], value)

    raised = _ast.Call(_ast.Name("_ptf_raised", _ast.Load()), [], [])
    handler = _ast.ExceptHandler(_ast.Name("BaseException", _ast.Load()), None, [store(raised)])
    guarded = store(node.test) if expecting else _ast.Try([store(node.test)], [handler], [], [])
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


def _expects_raise(node: _ast.AST) -> bool:
    """A ``with`` whose context is ``raises(...)``, ``pytest.raises(...)``, ``self.assertRaises(...)``
    (``assertRaisesRegex``...) or ``suppress(...)``: its block is expected to raise."""
    for item in getattr(node, "items", []):
        call = item.context_expr
        function = call.func if isinstance(call, _ast.Call) else None
        name = function.attr if isinstance(function, _ast.Attribute) else getattr(function, "id", "")
        if name == "raises" or name.startswith("assertRaises") or name == "suppress":
            return True
    return False


def _rewrite(node: _ast.AST, expecting: bool = False) -> int:
    """Replace every assert below ``node`` by its counted form, in place (what an
    ``ast.NodeTransformer`` with ``visit_Assert`` did); the number of asserts replaced."""
    if isinstance(node, _ast.FunctionDef | _ast.AsyncFunctionDef | _ast.ClassDef | _ast.Lambda):
        expecting = False  # a function's body runs where it is called, not inside the block
    found = 0
    for field in node._fields:
        value = getattr(node, field, None)
        inside = expecting or (
            field == "body"
            and (
                (isinstance(node, _ast.Try | _ast.TryStar) and bool(node.handlers))
                or (isinstance(node, _ast.With | _ast.AsyncWith) and _expects_raise(node))
            )
        )
        if isinstance(value, list):
            items: list[object] = []
            for item in value:
                if isinstance(item, _ast.Assert):
                    items.extend(_counted(item, inside))
                    found += 1
                else:
                    if isinstance(item, _ast.AST):
                        found += _rewrite(item, inside)
                    items.append(item)
            setattr(node, field, items)
        elif isinstance(value, _ast.AST):
            found += _rewrite(value, inside)
    return found


class _Tampered(Exception):
    """The solution changed something the tests lean on."""


def _runs_code(tree: _ast.Module) -> bool:
    """The tests' top level does more than define and import (an assert, a call, a loop...)."""
    quiet = (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef, _ast.Import, _ast.ImportFrom)
    return any(not isinstance(node, quiet) for node in tree.body)


def _from_tests(value: object) -> bool:
    code = getattr(value, "__code__", None)
    return code is not None and code.co_filename == "tests.py"


def run(solution: str | None, tests: str, entry_point: str | None, nonce: str = "") -> None:
    """Run the tests against the solution and write ``ASSERTIONS_MARK nonce passed total [why]``
    last. ``nonce`` is the host's, for this run; the solution never sees program.py (deleted
    before it loads), so a count line it prints cannot carry it. ``why``: the run abstains
    (``no_assertions``: the tests checked nothing; ``missing_module:NAME``: a third-party package
    the sandbox image lacks; ``unsupported:missing_entry_point``: no solution, ``None``, the reply
    defining no entry point where the prompt's own is written out)."""
    # Only as the sandbox job's program.py (run as __main__): imported on the host, as a module,
    # this refuses, so untrusted code can never be exec'd outside the sandbox by a stray call.
    if __name__ != "__main__":
        raise RuntimeError("the execution harness runs only inside the sandbox, as its program.py")
    _forget_program()
    if solution is None:
        _write(
            2, f"the reply defines no {entry_point}: the prompt's own is not the reply's to test\n".encode()
        )
        _write(1, f"\n{ASSERTIONS_MARK} {nonce} 0 0 unsupported:missing_entry_point\n".encode())
        _leave(1)
    flush = sys.stdout.flush
    written = 0
    ok = tampered = False
    try:
        # dont_inherit: this file's ``from __future__`` import must not change how the code compiles
        tree, tests = _tests_tree(tests)  # fenced tests, a doctest transcript: read as such
        _without_runners(tree)
        _open_names(tree)  # the tests' globals their own code changes: the rest is guarded
        _mention(tree)  # a pytest feature the stand-in lacks abstains only where the tests name it
        humaneval = _humaneval_check(tree, entry_point)
        modules = _imported(tree)
        _checked_subtractions(tree)  # abs(f(x) - want) < tol: an answer whose __sub__ says 0 is caught
        _honest_comparisons(tree)  # every ==, != and in of the tests: false through an always-equal object
        written = _rewrite(tree)
        code = compile(tree, "tests.py", "exec", dont_inherit=True)
        del tests
        if "pytest" in modules:
            _pytest_shim()
        _preload(modules)
        if "doctest" in sys.modules:
            _count_doctests()
        assigned = _assigned(tree)  # what the tests change themselves is not the solution's doing
        taken = [entry for entry in _snapshot(modules) if entry[1] not in assigned]
        # The tests run as the module ``__main__`` (doctest.testmod() finds their docstrings), with
        # the solution's names, as they would in its file; the harness's own module is out of reach.
        main = type(sys)("__main__")
        namespace = main.__dict__
        sys.modules["__main__"] = main
        # The solution loads as the module ``solution`` (not ``__main__``), as HumanEval's exec of
        # prompt + completion does: a reply's ``if __name__ == "__main__":`` demo (often an
        # ``input()``) stays out of the run, and tests that ``from solution import f`` find it.
        module = type(sys)("solution")
        module.__file__ = os.path.join(os.getcwd(), "solution.py")  # Path(__file__).parent, as python gives
        sys.modules["solution"] = module
        before = dict(namespace)  # what the solution may add to the tests' module while it loads
        parsed = compile(solution, "solution.py", "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
        own_pytest = "pytest" in solution  # the text first: no walk of the tree for most solutions
        del solution
        if not isinstance(parsed, _ast.Module):  # what "exec" mode always parses to
            raise TypeError(f"solution parsed to {type(parsed).__name__}")
        _without_runners(parsed)  # a reply's own unittest.main() would exit before the tests
        if own_pytest and "pytest" in _imported(parsed) and "pytest" not in sys.modules:
            _pytest_shim()  # the reply's own `import pytest` (for its own tests) gets the stand-in too
        _typing_names(parsed, module.__dict__)
        exec(compile(_without_stdin_demo(parsed), "solution.py", "exec", dont_inherit=True), module.__dict__)
        changed = _changed(taken)
        if changed:
            raise _Tampered(changed)
        _fresh_main(main, namespace, before)  # a __builtins__ of its own there would be the tests'
        namespace.update(_own_names(module.__dict__, _BUILTIN_NAMES, entry_point))
        _method_entry(namespace, entry_point)
        _watch(namespace)  # what the solution's functions return, checked for always-equal objects
        _stand_in_modules(tree, namespace, entry_point)  # `from add_module import add`: the solution
        namespace.update(__name__="__main__", _ptf_count=_ptf_count, _ptf_raised=_ptf_raised)
        namespace.update(
            _ptf_eq=_ptf_eq, _ptf_ne=_ptf_ne, _ptf_in=_ptf_in, _ptf_sub=_ptf_sub, __builtins__=builtins
        )
        _bind(
            namespace,
            ("_ptf_count", "_ptf_raised", "_ptf_eq", "_ptf_ne", "_ptf_in", "_ptf_sub", "__builtins__"),
        )
        defined = dict(namespace)
        exec(code, namespace)
        _guard_tests(namespace, defined)  # the tests' functions and classes as defined: checked at the end
        # HumanEval-style tests define check(candidate): called with the entry point; MBPP-style
        # ones are top-level asserts that have already run above; pytest- and unittest-style ones
        # define test functions, Test classes and TestCases that nothing calls: they run here
        if humaneval:
            namespace["check"](namespace[entry_point])  # type: ignore[index]
        tested = _run_units(namespace, main, tree)
        if not (humaneval or tested or _counts[1] or _runs_code(tree) or _unrunnable):
            # definitions only, none called: 0 of 0 assertions would read as a pass
            raise RuntimeError(
                "no test ran: the tests only define functions or classes and nothing calls them"
                + (" (check(candidate) needs the entry point)" if "check" in namespace else "")
            )
        changed = _changed(taken, callables_only=True) or _moved()
        if changed:
            raise _Tampered(changed)
        ok = True
    except _Tampered as exc:
        tampered = True
        _write(2, f"the solution changed {exc}, which the tests rely on: the run is not graded\n".encode())
    except BaseException as exc:  # the traceback goes to stderr, as it would without the harness
        _note_missing(exc)
        try:
            import traceback

            traceback.print_exc()
        except BaseException:  # a solution may have broken printing: the counts still go out
            pass
    passed, evaluated = _counts
    total = evaluated if ok else max(evaluated, written)
    if _fakes:
        fake = f"an always-equal object (a {_fakes[0]} that is or holds one)"
        _write(2, f"the solution returned {fake}, which equals anything: the run is not graded\n".encode())
    if tampered or _fakes:
        passed = 0
    why = ""
    if _missing and not (ok and passed == total):
        why = f" missing_module:{_missing[0]}"
    elif _unsupported and not (ok and 0 < total == passed):
        why = f" unsupported:{_unsupported[0]}"
    elif _unrunnable and not (ok and passed < total):  # a test never ran: no pass on the rest
        why = f" unsupported:{_unrunnable[0]}"
    elif ok and total == 0:
        why = " no_assertions"
    try:
        flush()
        sys.stderr.flush()
    except BaseException:  # a solution may have closed or replaced the streams
        pass
    _write(1, f"\n{ASSERTIONS_MARK} {nonce} {passed} {total}{why}\n".encode())
    _leave(0 if ok and 0 < total == passed and not why else 1)
