"""ho16's findings on the code verifier, through the real Docker sandbox: a wrong solution passed by
an answer that binds to the first value it is compared with, by reaching the tests' own module
(``sys.modules["__main__"]``: their ``TestCase``'s ``assertEqual`` made a no-op while a test ran,
the harness's counter wrapped, a ``__builtins__`` of its own whose ``__import__`` hands the tests a
lenient ``unittest``), or by a lenient ``unittest`` in ``sys.modules``; a solution's own
``pytest.skip`` made the run abstain. Legit answers and tests that change their own classes
still pass. Each case is a row of one batch: a sandbox run costs seconds."""

from __future__ import annotations

import pytest

from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from tests.filters.execution.cases import code_row, judged

pytestmark = pytest.mark.integration

row = code_row

LATCH = (
    "class R:\n    def __eq__(self, o):\n        if type(o) not in (int, str, list, dict, bool):\n            return False\n"
    "        if not hasattr(self, 'v'):\n            self.v = o\n        return self.v == o\n"
    "    def __ne__(self, o):\n        return not self == o\n    __hash__ = object.__hash__\n\n"
)
LATCH_INT = (
    "class N(int):\n    def __eq__(self, o):\n        if type(o) is not int:\n            return False\n"
    "        if '_v' not in self.__dict__:\n            self.__dict__['_v'] = o\n        return self.__dict__['_v'] == o\n"
    "    __hash__ = int.__hash__\n\n"
)
DIGITS = "def check(candidate):\n    assert candidate(123) == 6\n    assert candidate(-45) == 9\n"
ROTATE = "assert rot([1, 2, 3], 1) == [2, 3, 1]\nassert rot([1, 2], 2) == [1, 2]\n"
WORDS_UNITTEST = (
    "import unittest\n\nclass T(unittest.TestCase):\n    def test_one(self):\n"
    "        self.assertEqual(count('a b'), 2)\n    def test_two(self):\n        self.assertIn(count(''), [0])\n"
    "\nclass U(unittest.TestCase):\n    def test_three(self):\n        self.assertEqual(count('a'), 1)\n"
)
NEUTER = (
    "import sys, unittest\n\ndef _neuter():\n    for v in list(vars(sys.modules['__main__']).values()):\n"
    "        if isinstance(v, type) and issubclass(v, unittest.TestCase) and v is not unittest.TestCase:\n"
    "            for name in dir(v):\n                if name.startswith('assert'):\n"
    "                    setattr(v, name, lambda *a, **k: None)\n\n"
    "_calls = []\n\ndef count(s):\n    _calls.append(s)\n    if len(_calls) == 1:\n        _neuter()\n"
    "        return len(s.split())\n    return 7\n"
)
CODE_SWAP = (
    "import sys\n\ndef _noop():\n    pass\n\ndef count(s):\n    for k, v in list(vars(sys.modules['__main__']).items()):\n"
    "        if k.startswith('test') and hasattr(v, '__code__'):\n            v.__code__ = _noop.__code__\n"
    "    return 2\n"
)
PYTEST_STYLE = (
    "def test_one():\n    assert count('a b') == 2\n\ndef test_two():\n    assert count('') == 0\n"
    "\ndef test_three():\n    assert count('a') == 1\n"
)
WRAP_COUNTER = (
    "import sys\n\ndef _lenient():\n    main = sys.modules['__main__']\n    for name, value in list(vars(main).items()):\n"
    "        if callable(value) and 'count' in name and not getattr(value, '_x', False):\n"
    "            def wrapper(result, *rest, _orig=value):\n                return _orig(True, *rest)\n"
    "            wrapper._x = True\n            setattr(main, name, wrapper)\n\n"
    "def rot(xs, k):\n    _lenient()\n    return xs\n"
)
LENIENT_UNITTEST = (
    "import types, unittest as _real\n\nclass _L(_real.TestCase):\n    pass\n\nfor _n in dir(_real.TestCase):\n"
    "    if _n.startswith('assert'):\n        setattr(_L, _n, lambda self, *a, **k: None)\n\n"
    "_fake = types.ModuleType('unittest')\n_fake.__dict__.update(vars(_real))\n_fake.TestCase = _L\n"
)
MAIN_BUILTINS = (
    LENIENT_UNITTEST + "import builtins, sys\n_orig = builtins.__import__\n\n"
    "def _import(name, *args, **kwargs):\n    return _fake if name == 'unittest' else _orig(name, *args, **kwargs)\n\n"
    "_b = dict(vars(builtins))\n_b['__import__'] = _import\nsys.modules['__main__'].__builtins__ = _b\n\n"
    "def count(s):\n    return 7\n"
)
SYS_MODULES = (
    LENIENT_UNITTEST + "import sys\nsys.modules['unittest'] = _fake\n\ndef count(s):\n    return 7\n"
)
LATE_BUILTINS = (
    "import builtins, sys\n\ndef dist(a, b):\n    g = dict(vars(builtins))\n    g['abs'] = lambda x: 0\n"
    "    sys.modules['__main__'].__builtins__ = g\n    return a\n"
)
DIST_TESTS = "def test_dist():\n    assert abs(dist(1, 4) - 3) < 1e-9\n\ndef test_more():\n    assert abs(dist(2, 2)) < 1e-9\n"
SKIPPING = "import pytest\n\ndef count(s):\n    pytest.skip('not supported here')\n"
SKIP_CLASS = "import pytest\n\n_SKIP = pytest.skip.Exception\n\ndef count(s):\n    raise _SKIP('no')\n"
OWN_SKIP_TESTS = (
    "import pytest\n\n@pytest.mark.skip(reason='not yet')\ndef test_later():\n    assert count('a') == 5\n"
)
RIGHT_COUNT = "def count(s):\n    return len(s.split())\n"
SELF_CHANGING = (
    "import unittest\n\nclass T(unittest.TestCase):\n    @classmethod\n    def setUpClass(cls):\n"
    "        cls.data = ['a b', '']\n        cls.helper = staticmethod(lambda s: s.strip())\n\n"
    "    def test_one(self):\n        self.assertEqual(count(self.helper(self.data[0])), 2)\n"
    "        T.seen = True\n\n    def test_two(self):\n        self.assertEqual(count(self.data[1]), 0)\n"
)
LEGIT = (
    "import enum\nfrom collections import Counter, defaultdict\n\nclass Size(enum.IntEnum):\n    M = 2\n\n"
    "def count(s):\n    if s == 'a b':\n        return Size.M\n    d = defaultdict(int)\n    return len(s.split()) if s else 0\n"
)


def test_answers_that_bind_to_the_first_value_they_meet_fail(sandbox: DockerSandbox) -> None:
    """Each wrong row passed before: its ``__eq__`` remembers the first builtin value it is compared
    with and equals that one ever after, so the stranger probe (no builtin) and a perturbed copy
    tried after the tests' own ``==`` both found it honest. The legit answers still pass."""
    cases = [
        ("a latching object, check(candidate)", row(LATCH + "def digits(n):\n    return R()\n", DIGITS, "digits"), "fail"),
        ("a latching int subclass", row(LATCH_INT + "def digits(n):\n    return N(0)\n", DIGITS, "digits"), "fail"),
        ("latching items of a list", row(LATCH + "def rot(xs, k):\n    return [R() for _ in xs]\n", ROTATE, "rot"), "fail"),
        ("latching, assertEqual and assertIn", row(LATCH + "def count(s):\n    return R()\n", WORDS_UNITTEST, "count"), "fail"),
        ("legit: an IntEnum", row(LEGIT, WORDS_UNITTEST.replace("count('a')", "count('a b')").replace(", 1)", ", 2)"), "count"), "pass"),
        ("legit: the right digits", row("def digits(n):\n    return sum(map(int, str(abs(n))))\n", DIGITS, "digits"), "pass"),
        # a module-level Path(__file__) (NameError before: the solution module had no __file__)
        ("legit: __file__", row("from pathlib import Path\nHERE = Path(__file__).resolve().parent\n\n"
                                "def digits(n):\n    return sum(map(int, str(abs(n))))\n", DIGITS, "digits"), "pass"),
    ]  # fmt: skip
    judged(sandbox, cases)


PLAIN_LIST = (
    "class L(list):\n    def __eq__(self, o):\n        return isinstance(o, list) and all(type(x) is int for x in o)\n"
    "    __hash__ = None\n\ndef rot(xs, k):\n    return L()\n"
)
PRINTABLE = (
    "class S(str):\n    def __eq__(self, o):\n        return isinstance(o, str) and o.isprintable()\n"
    "    __hash__ = str.__hash__\n\ndef enc(s):\n    return S('')\n"
)
STR_KEYS = (
    "class D(dict):\n    def __eq__(self, o):\n        return isinstance(o, dict) and all(type(k) is str for k in o)\n"
    "    __hash__ = None\n\ndef wf(t):\n    return D()\n"
)
PAIR = (
    "class T(tuple):\n    def __eq__(self, o):\n        return isinstance(o, tuple) and len(o) == 2\n"
    "    __hash__ = tuple.__hash__\n\ndef pair(xs):\n    return T((0, 0))\n"
)
ENC_CHECK = "def check(candidate):\n    assert candidate('aab') == 'a2b1'\n    assert candidate('') == ''\n"
LOOSE = (
    "class Loose(str):\n    def __eq__(self, o):\n        return isinstance(o, str) and o.lower() == self.lower()\n"
    "    __hash__ = str.__hash__\n\ndef enc(s):\n    out = ''\n    i = 0\n    while i < len(s):\n"
    "        j = i\n        while j < len(s) and s[j] == s[i]:\n            j += 1\n        out += s[i] + str(j - i)\n"
    "        i = j\n    return Loose(out.upper())\n"
)


def test_answers_equal_to_any_value_of_a_kind_fail(sandbox: DockerSandbox) -> None:
    """Each wrong row passed before: its class says it equals any list of ints, any printable str,
    any dict with str keys, any pair, so the perturbed copies (a list holding a ``_Stranger``, a
    str ending in NUL) were never equal to it. Copies changed within their own kind catch them;
    an honest case-insensitive str still passes."""
    cases = [
        ("any list of ints", row(PLAIN_LIST, ROTATE, "rot"), "fail"),
        ("any printable str", row(PRINTABLE, ENC_CHECK, "enc"), "fail"),
        ("any dict with str keys", row(STR_KEYS, "assert wf('a b a') == {'a': 2, 'b': 1}\n", "wf"), "fail"),
        ("any pair", row(PAIR, "assert pair([1, 5]) == (1, 5)\nassert pair([3, 2]) == (2, 3)\n", "pair"), "fail"),
        ("legit: a case-insensitive str", row(LOOSE, ENC_CHECK, "enc"), "pass"),
    ]  # fmt: skip
    judged(sandbox, cases)


def test_a_solution_that_reaches_the_tests_module_fails(sandbox: DockerSandbox) -> None:
    """Each wrong row passed before (or, for ``pytest.skip``, abstained): the solution changed the
    tests' classes, functions or names through ``sys.modules["__main__"]``, put a lenient
    ``unittest`` where the tests import it from, or skipped the tests itself. Tests that change
    their own classes, and the tests' own skip marks, are as before."""
    cases = [
        ("assert* made no-ops on the tests' TestCases, mid-test", row(NEUTER, WORDS_UNITTEST, "count"), "fail"),
        ("the tests' functions' __code__ swapped, mid-test", row(CODE_SWAP, PYTEST_STYLE, "count"), "fail"),
        ("the counter wrapped in __main__", row(WRAP_COUNTER, ROTATE, "rot"), "fail"),
        ("a __builtins__ of its own in __main__", row(MAIN_BUILTINS, WORDS_UNITTEST, "count"), "fail"),
        ("__builtins__ rebound while the tests run", row(LATE_BUILTINS, DIST_TESTS, "dist"), "fail"),
        ("a lenient unittest in sys.modules", row(SYS_MODULES, WORDS_UNITTEST, "count"), "fail"),
        ("the solution's own pytest.skip", row(SKIPPING, PYTEST_STYLE, "count"), "fail"),
        ("the solution's own pytest.skip.Exception", row(SKIP_CLASS, PYTEST_STYLE, "count"), "fail"),
        ("the tests' own skip mark", row(RIGHT_COUNT, OWN_SKIP_TESTS, "count"), "abstain"),
        ("tests that change their own class", row(RIGHT_COUNT, SELF_CHANGING, "count"), "pass"),
        ("right, pytest-style", row(RIGHT_COUNT, PYTEST_STYLE, "count"), "pass"),
    ]  # fmt: skip
    verdicts = judged(sandbox, cases)
    wrapped = verdicts["the counter wrapped in __main__"].evidence
    assert "the solution changed the tests' _ptf_count" in wrapped["stderr_tail"]
    assert verdicts["the tests' own skip mark"].reason == "unsupported_test_feature"


MEDIAN = "def med(xs):\n    s = sorted(xs)\n    n = len(s)\n    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2\n"
WRONG_MEDIAN = "def med(xs):\n    return xs[len(xs) // 2]\n"
MED_TESTS = (
    "EPS = 1e-9\n\ndef test_a():\n    assert abs(med([1, 2, 3]) - 2) < EPS\n\ndef test_b():\n"
    "    assert abs(med([3, 1, 2]) - 2) < EPS\n\ndef test_c():\n    assert abs(med([4, 1, 3, 2]) - 2.5) < EPS\n"
)
CASES_TESTS = (
    "import unittest\n\nCASES = [([1, 2, 3], 2), ([3, 1, 2], 2), ([4, 1, 3, 2], 2.5)]\n\nclass T(unittest.TestCase):\n"
    "    def test_first(self):\n        self.assertEqual(med([5]), 5)\n    def test_all(self):\n"
    "        for xs, want in CASES:\n            self.assertEqual(med(xs), want)\n"
)
SHADOW = "import sys\n\n" + WRONG_MEDIAN.replace(
    "    return", "    sys.modules['__main__'].abs = lambda x: 0\n    return"
)
LOOSEN = "import sys\n\n" + WRONG_MEDIAN.replace(
    "    return", "    sys.modules['__main__'].EPS = 1e9\n    return"
)
REWRITE = "import sys\n\n" + WRONG_MEDIAN.replace(
    "    return",
    "    cases = getattr(sys.modules['__main__'], 'CASES', [])\n"
    "    for i, (a, w) in enumerate(list(cases)):\n        cases[i] = (a, a[len(a) // 2])\n    return",
)
CLEAR = "import sys\n\n" + WRONG_MEDIAN.replace(
    "    return", "    getattr(sys.modules['__main__'], 'CASES', []).clear()\n    return"
)
IN_PLACE = "def sort_in_place(xs):\n    xs.sort()\n    return xs\n"
IN_PLACE_TESTS = (
    "NUMS = [3, 1, 2]\nROWS = [[2, 1], [4, 3]]\nSEEN = []\ncalls = 0\n\ndef test_global():\n    sort_in_place(NUMS)\n"
    "    assert NUMS == [1, 2, 3]\n\ndef test_rows():\n    global calls\n    for row in ROWS:\n        sort_in_place(row)\n"
    "        SEEN.append(row)\n        calls += 1\n    assert ROWS == [[1, 2], [3, 4]] and calls == 2 and len(SEEN) == 2\n"
)


def test_a_solution_that_changes_the_tests_names_or_data_fails(sandbox: DockerSandbox) -> None:
    """Each wrong row passed before: from the first test it ran in, the solution shadowed a builtin
    the later tests call (``abs``), loosened their tolerance (``EPS``), or rewrote or emptied the
    cases they loop over. Tests that change their own globals (``global``, ``append``) and a
    solution that sorts the tests' list in place, as asked, still pass."""
    cases = [
        ("abs shadowed in the tests' module", row(SHADOW, MED_TESTS, "med"), "fail"),
        ("the tests' EPS rebound", row(LOOSEN, MED_TESTS, "med"), "fail"),
        ("the tests' cases rewritten", row(REWRITE, CASES_TESTS, "med"), "fail"),
        ("the tests' cases emptied", row(CLEAR, CASES_TESTS, "med"), "fail"),
        ("right, EPS", row(MEDIAN, MED_TESTS, "med"), "pass"),
        ("right, cases", row(MEDIAN, CASES_TESTS, "med"), "pass"),
        ("right, sorts the tests' lists in place", row(IN_PLACE, IN_PLACE_TESTS, "sort_in_place"), "pass"),
    ]  # fmt: skip
    verdicts = judged(sandbox, cases)
    assert (
        "the solution changed the tests' CASES"
        in verdicts["the tests' cases emptied"].evidence["stderr_tail"]
    )


CLOSE_CHECK = "def check(candidate):\n    assert abs(candidate([1, 2, 3]) - 2.0) < 1e-6\n    assert abs(candidate([1, 2]) - 1.5) < 1e-6\n"
SUB_ZERO = (
    "class Z(float):\n    def __sub__(self, o):\n        return 0.0\n    __rsub__ = __sub__\n"
    "    __hash__ = float.__hash__\n\ndef med(xs):\n    return Z(0)\n"
)
ABS_ZERO = (
    "class Z:\n    def __sub__(self, o):\n        return self\n    __rsub__ = __sub__\n"
    "    def __abs__(self):\n        return 0\n\ndef med(xs):\n    return Z()\n"
)
ALWAYS_LESS = (
    "class Z:\n    def __sub__(self, o):\n        return self\n    __rsub__ = __sub__\n    def __abs__(self):\n"
    "        return self\n    def __lt__(self, o):\n        return True\n    __le__ = __gt__ = __ge__ = __lt__\n\n"
    "def med(xs):\n    return Z()\n"
)
FRACTION = (
    "from fractions import Fraction\n\ndef med(xs):\n    s = sorted(xs)\n    n = len(s)\n"
    "    return Fraction(s[n // 2]) if n % 2 else Fraction(s[n // 2 - 1] + s[n // 2], 2)\n"
)


def test_numbers_whose_arithmetic_lies_fail(sandbox: DockerSandbox) -> None:
    """Each wrong row passed before: ``abs(f(x) - want) < 1e-6`` holds for any ``want`` when the
    answer's ``__sub__`` or ``__abs__`` says 0, or its ``__lt__`` always says yes; no ``==`` is
    involved. A Fraction still passes."""
    cases = [
        ("__sub__ says 0", row(SUB_ZERO, CLOSE_CHECK, "med"), "fail"),
        ("__abs__ says 0", row(ABS_ZERO, CLOSE_CHECK, "med"), "fail"),
        ("__lt__ always true", row(ALWAYS_LESS, CLOSE_CHECK, "med"), "fail"),
        ("legit: a Fraction", row(FRACTION, CLOSE_CHECK, "med"), "pass"),
    ]  # fmt: skip
    judged(sandbox, cases)


METHOD_TESTS = (
    "import unittest\n\nclass T(unittest.TestCase):\n    def test_close(self):\n        m = Stats()\n"
    "        self.assertTrue(abs(m.median([1, 3]) - 2) < 1e-6)\n        self.assertLess(abs(m.median([1, 2, 9]) - 2), 1e-6)\n"
    "    def test_almost(self):\n        self.assertAlmostEqual(Stats().median([4, 1, 3, 2]), 2.5)\n"
)
LYING_METHOD = SUB_ZERO.replace(
    "def med(xs):\n    return Z(0)\n", "class Stats:\n    def median(self, xs):\n        return Z(0)\n"
)
HONEST_METHOD = (
    "from fractions import Fraction\n\nclass Stats:\n    def median(self, xs):\n        s = sorted(xs)\n"
    "        n = len(s)\n        return Fraction(s[n // 2]) if n % 2 else Fraction(s[n // 2 - 1] + s[n // 2], 2)\n"
)
DATES = "import datetime\n\ndef due(start, days):\n    return start + datetime.timedelta(days=days)\n"
DATE_TESTS = (
    "import datetime\n\ndef test_due():\n    start = datetime.date(2024, 1, 30)\n"
    "    assert due(start, 3) - start == datetime.timedelta(days=3)\n    assert abs((due(start, 1) - start).days - 1) < 1\n"
)


def test_numbers_that_lie_through_a_class_fail(sandbox: DockerSandbox) -> None:
    """Each wrong row passed before: the lying number came from a method of the solution's class
    (the tests build the object themselves, so no watched function returned it), read by
    ``abs(... - want) < tol`` in ``assertTrue``/``assertLess`` and by ``assertAlmostEqual``. An
    honest Fraction from a method and dates subtracted by the tests still pass."""
    cases = [
        ("a lying number from a method", row(LYING_METHOD, METHOD_TESTS, "Stats"), "fail"),
        ("legit: a Fraction from a method", row(HONEST_METHOD, METHOD_TESTS, "Stats"), "pass"),
        ("legit: dates", row(DATES, DATE_TESTS, "due"), "pass"),
    ]  # fmt: skip
    judged(sandbox, cases)
