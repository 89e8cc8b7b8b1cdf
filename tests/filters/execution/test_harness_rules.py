"""The execution harness's rules, through the code verifier and the real Docker sandbox: a solution
that games the count fails; failures the test shapes hide (subTest, setUpClass, doctest) fail;
right replies in shapes the harness misread (unittest.main(), pytest classes, an assert inside
``pytest.raises``, MBPP's ``check`` entry point...) pass; tests that check nothing abstain. Each
case is a right/wrong row of one batch: a sandbox run costs seconds."""

from __future__ import annotations

from typing import Any

import pytest

from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from ptfactory.filters.verify import CodeVerifier
from tests.filters.execution.cases import code_row

pytestmark = pytest.mark.integration

CHECK = "def check(candidate):\n    assert candidate(6, 3) == 2\n    assert candidate(1, 0) is None\n"
RIGHT = "def divide(a, b):\n    return None if b == 0 else a / b\n"
WRONG = "def divide(a, b):\n    return 2\n"


def row(reply: str, tests: str = CHECK, entry: str = "divide", prompt: str = "Write it.") -> dict[str, Any]:
    return code_row(reply, tests, entry, prompt)


CHEATS = {
    # a count line of its own, then a clean exit before the tests run
    "fake_count_line": WRONG + "import os\nprint('\\n@ptf-assertions 2 2', flush=True)\nos._exit(0)\n",
    # the harness's truth test rebound
    "rebinds_bool": WRONG + "import builtins\nbuiltins.bool = lambda *a: True\n",
    # the tests read from program.py
    "reads_the_tests": (
        "import ast, sys\n_SRC = open(sys.argv[0]).read()\n"
        "def divide(a, b):\n    return None if b == 0 else a / b\n"
    ),
    # a helper of the tests' module patched
    "patches_isclose": "import math\nmath.isclose = lambda *a, **k: True\ndef divide(a, b):\n    return 0\n",
    # unittest's own assertion patched
    "patches_testcase": (
        "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\ndef divide(a, b):\n    return 0\n"
    ),
    # an answer that equals anything
    "always_equal": (
        "class _Any(float):\n    def __eq__(self, other):\n        return True\n    __hash__ = float.__hash__\n"
        "def divide(a, b):\n    return _Any(0)\n"
    ),
}
CHEAT_TESTS = {
    "patches_isclose": "import math\n\ndef check(candidate):\n    assert math.isclose(candidate(6, 3), 2)\n",
    "patches_testcase": (
        "import unittest\n\nclass T(unittest.TestCase):\n"
        "    def test_it(self):\n        self.assertEqual(divide(6, 3), 2)\n"
    ),
}


def test_a_solution_that_games_the_count_fails(sandbox: DockerSandbox) -> None:
    """Each passed before: the count line was trusted, the harness's bool was the solution's,
    program.py was readable, patched helpers made every check hold."""
    names = list(CHEATS)
    rows = [row(CHEATS[n], CHEAT_TESTS.get(n, CHECK)) for n in names]
    verdicts = CodeVerifier(sandbox).verify_many([*rows, row(RIGHT)])
    assert {n: v.verdict for n, v in zip(names, verdicts, strict=False)} == dict.fromkeys(names, "fail")
    assert verdicts[-1].verdict == "pass"  # the right solution to the same tests still passes
    reading = verdicts[names.index("reads_the_tests")]
    assert "FileNotFoundError" in reading.evidence["stderr_tail"]  # program.py was gone
    patched = verdicts[names.index("patches_isclose")]
    assert "the solution changed math.isclose" in patched.evidence["stderr_tail"]


UNITTEST_MAIN = (
    "import unittest\n\nclass T(unittest.TestCase):\n    def test_it(self):\n"
    "        self.assertEqual(divide(6, 3), 2)\n\nif __name__ == '__main__':\n    unittest.main()\n"
)
SUBTEST = (
    "import unittest\n\nclass T(unittest.TestCase):\n    def test_it(self):\n"
    "        for a, b in [(6, 3), (8, 2)]:\n            with self.subTest(a=a):\n"
    "                self.assertEqual(divide(a, b), a / b)\n"
)
SETUP_CLASS = (
    "import unittest\n\nclass T(unittest.TestCase):\n    @classmethod\n    def setUpClass(cls):\n"
    "        cls.value = divide(6, 3) + 0\n    def test_it(self):\n        self.assertEqual(self.value, 2)\n"
)
TESTMOD = 'import doctest\n\ndef _examples():\n    """\n    >>> divide(8, 2)\n    4.0\n    """\n\nassert doctest.testmod().failed == 0\n'
DOCSTRING_EXAMPLES = (
    'import doctest\n\ndef _examples():\n    """\n    >>> divide(8, 2)\n    4.0\n    """\n\n'
    "doctest.run_docstring_examples(_examples, globals())\n"
)
PYTEST_CLASS = "class TestDivide:\n    def test_it(self):\n        assert divide(6, 3) == 2\n"
RAISES = (
    "import pytest\n\ndef test_zero():\n    with pytest.raises(ZeroDivisionError):\n        assert divide(1, 0)\n\n"
    "def test_value():\n    assert divide(6, 3) == pytest.approx(2.0, abs=1e-3)\n"
    "    assert [divide(1, 4)] == pytest.approx([0.25])\n    pytest.raises(ZeroDivisionError, divide, 2, 0)\n"
)
TRY_EXCEPT = (
    "def check(candidate):\n    assert candidate(6, 3) == 2\n    try:\n        assert candidate(1, 0) is None\n"
    "    except ZeroDivisionError:\n        pass\n"
)
CALLS_ITS_CHECK = "def check():\n    assert divide(6, 3) == 2\n\ncheck()\n"
RAISING = "def divide(a, b):\n    return a / b\n"
OFF = "def divide(a, b):\n    return a / b + 0.01\n"
MBPP_CHECK = "assert check(70) == False\nassert check(73) == True\n"


def test_test_shapes(sandbox: DockerSandbox) -> None:
    cases = [
        ("unittest.main() at the end", row(RAISING, UNITTEST_MAIN), "pass"),
        ("unittest.main(), wrong", row(WRONG.replace("2", "3"), UNITTEST_MAIN), "fail"),
        ("a subTest failure", row(OFF, SUBTEST), "fail"),
        ("an error in setUpClass", row("def divide(a, b):\n    return None\n", SETUP_CLASS), "fail"),
        ("doctest.testmod", row(RAISING, TESTMOD), "pass"),
        ("doctest.testmod, wrong", row(OFF, TESTMOD), "fail"),
        ("run_docstring_examples, wrong", row(OFF, DOCSTRING_EXAMPLES), "fail"),
        ("a pytest-style class", row(RAISING, PYTEST_CLASS), "pass"),
        ("a pytest-style class, wrong", row(OFF, PYTEST_CLASS), "fail"),
        ("assert in pytest.raises, approx(abs=), approx([..]), raises(E, f, *args)", row(RAISING, RAISES), "pass"),
        ("approx(abs=) alone ignores rel", row("def divide(a, b):\n    return a / b + 0.01\n", RAISES), "fail"),
        ("an assert in a try that expects the error", row(RAISING, TRY_EXCEPT), "pass"),
        ("check() the tests call themselves", row(RIGHT, CALLS_ITS_CHECK), "pass"),
        ("the entry point named check (MBPP #56)", row("def check(n):\n    return 2 * int(str(n)[::-1]) == n + 1\n", MBPP_CHECK, "check"), "pass"),
        ("a reply defining a check() of its own", row(RIGHT + "def check():\n    print('ok')\n", "assert divide(6, 3) == 2\n"), "pass"),
        ("main() reading input() at the top level", row(RIGHT + "def main():\n    print(divide(int(input()), 2))\n\nmain()\n", "assert divide(6, 3) == 2\n"), "pass"),
        ("entry point Solution.divide", row("class Solution:\n    def divide(self, a, b):\n        return a / b\n", "def check(candidate):\n    assert candidate(6, 3) == 2\n", "Solution.divide"), "pass"),
        ("entry point ' divide() '", row(RAISING, "def check(candidate):\n    assert candidate(6, 3) == 2\n", " divide() "), "pass"),
        ("tests that only print", row(RIGHT, "print('PASS' if divide(6, 3) == 2 else 'FAIL')\n"), "abstain"),
        ("numpy, which the image lacks", row("import numpy as np\n" + RAISING, "assert divide(6, 3) == 2\n"), "abstain"),
    ]  # fmt: skip
    verdicts = CodeVerifier(sandbox).verify_many([r for _, r, _ in cases])
    got = {name: v.verdict for (name, _, _), v in zip(cases, verdicts, strict=True)}
    assert got == {name: expected for name, _, expected in cases}
    reasons = {name: v.reason for (name, _, _), v in zip(cases, verdicts, strict=True)}
    assert reasons["tests that only print"] == "no_assertions"
    assert reasons["numpy, which the image lacks"] == "missing_module"


FAKE_IMPORT = (
    "import builtins as _b\n\nclass _M:\n    def isclose(self, *a, **k):\n        return True\n\n"
    "_real = _b.__import__\n\ndef _imp(name, *a, **k):\n    return _M() if name == 'math' else _real(name, *a, **k)\n\n"
    "__builtins__ = dict(vars(_b), __import__=_imp)\n\ndef divide(a, b):\n    return 0\n"
)
CODE_SWAP = (
    "import unittest\n\ndef _ok(self, first, second, msg=None):\n    pass\n\n"
    "unittest.TestCase.assertEqual.__code__ = _ok.__code__\n" + WRONG
)
APPROX = "import pytest\n\ndef test_it():\n    assert divide(6, 3) == pytest.approx(2.0)\n"
PARAMETRIZE = (
    "import pytest\n\n@pytest.mark.parametrize('a,b,want', [(6, 3, 2), pytest.param(8, 2, 4)])\n"
    "def test_divide(a, b, want):\n    assert divide(a, b) == want\n\n"
    "@pytest.mark.parametrize('b', [1, 2])\n@pytest.mark.parametrize('a', [4])\ndef test_grid(a, b):\n"
    "    assert divide(a, b) * b == a\n"
)
FIXTURE = (  # a parametrized fixture (request.param): the stand-in gives plain fixtures only
    "import pytest\n\n@pytest.fixture(params=[(6, 3)])\ndef pair(request):\n    return request.param\n\n"
    "def test_it(pair):\n    assert divide(*pair) == 2\n"
)
SETS_INPUT = (
    "import builtins\nbuiltins.input = lambda *a: '6 3'\nassert divide(*map(int, input().split())) == 2\n"
)
STDIN_MAIN = "import sys\n\ndef main():\n    data = sys.stdin.read().split()\n    print(divide(int(data[0]), 2))\n\nmain()\n"
STDIN_TOP = "import sys\nt = int(sys.stdin.readline())\nfor line in sys.stdin:\n    print(line)\n"
TYPED = "class Solution:\n    def divide(self, a: int, b: int) -> Optional[float]:\n        return None if b == 0 else a / b\n"
TYPED_FUTURE = "from __future__ import annotations\n\ndef divide(a: int, b: int) -> Optional[float]:\n    x: List[int] = []\n    return None if b == 0 else a / b + len(x)\n"


def test_held_out_rules(sandbox: DockerSandbox) -> None:
    """ho9's findings: the solution's names shadowing the tests' builtins (abs, set,
    __builtins__), __code__ swapped in place, the pytest stand-in's classes patched, parametrize,
    stdin read through sys.stdin, tests that set builtins.input, LeetCode's typing names."""
    cases = [
        ("shadows abs", row("def abs(x):\n    return 0\n" + WRONG, "assert abs(divide(6, 3) - 2.5) < 1e-9\n"), "fail"),
        ("shadows set", row("set = lambda *a: frozenset()\n" + WRONG, "assert set([divide(6, 3)]) == set([2.5])\n"), "fail"),
        ("__builtins__ with a fake __import__", row(FAKE_IMPORT, "import math\nassert math.isclose(divide(6, 3), 2)\n"), "fail"),
        ("assertEqual.__code__ swapped", row(CODE_SWAP, UNITTEST_MAIN), "fail"),
        ("approx.__eq__ patched", row("import pytest\npytest.approx.__eq__ = lambda s, o: True\n" + WRONG.replace("2", "0"), APPROX), "fail"),
        ("raises.__exit__ patched", row("import pytest\ntype(pytest.raises(ValueError)).__exit__ = lambda *a: True\n" + RIGHT, APPROX), "fail"),
        ("parametrize", row(RAISING, PARAMETRIZE), "pass"),
        ("parametrize, wrong", row(OFF, PARAMETRIZE), "fail"),
        ("a fixture: unsupported", row(RAISING, FIXTURE), "abstain"),
        ("main() reading sys.stdin.read()", row(RIGHT + STDIN_MAIN, "assert divide(6, 3) == 2\n"), "pass"),
        ("sys.stdin.readline() and a loop at the top level", row(RIGHT + STDIN_TOP, "assert divide(6, 3) == 2\n"), "pass"),
        ("tests that set builtins.input", row(RIGHT, SETS_INPUT), "pass"),
        ("LeetCode's Optional without an import", row(TYPED, CHECK, "Solution.divide"), "pass"),
        ("typing names after from __future__", row(TYPED_FUTURE, CHECK), "pass"),
    ]  # fmt: skip
    verdicts = CodeVerifier(sandbox).verify_many([r for _, r, _ in cases])
    got = {name: v.verdict for (name, _, _), v in zip(cases, verdicts, strict=True)}
    assert got == {name: expected for name, _, expected in cases}
    reasons = {name: v.reason for (name, _, _), v in zip(cases, verdicts, strict=True)}
    assert reasons["a fixture: unsupported"] == "unsupported_test_feature"


TOTAL_TESTS = (
    "import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(total([1, 2, 3]), 6)\n"
    "    def test_b(self):\n        self.assertEqual(total([]), 0)\n    def test_c(self):\n        self.assertTrue(total([2, 2]) == 4)\n"
)
ASSERT_TRUE_ONLY = "import unittest\n\nclass T(unittest.TestCase):\n    def test_c(self):\n        self.assertTrue(total([2, 2]) == 4)\n"
ANY = "class _Any:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n\n"
ALWAYS_INT = (
    "class _I(int):\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n        return False\n"
    "    __hash__ = int.__hash__\n\n"
)
# the always-equal object comes back from a method (not one of the functions the tests get),
# so only the checks of unittest's assertions and of the tests' own comparisons see it
METHOD_ANY = ANY + "class Box:\n    def get(self, xs):\n        return [_Any()]\n"
METHOD_TESTS = (
    "import unittest\n\nclass T(unittest.TestCase):\n    def test_eq(self):\n        self.assertListEqual(Box().get([1]), [1])\n"
    "    def test_in(self):\n        self.assertIn(Box().get([1])[0], [1, 2])\n"
    "    def test_count(self):\n        self.assertCountEqual(Box().get([3]), [3])\n"
    "    def test_close(self):\n        self.assertAlmostEqual(Box().get([3])[0], 3)\n"
    "    def test_true(self):\n        self.assertTrue(Box().get([3]) == [3])\n"
)
FROM_SOLUTION = TOTAL_TESTS.replace("import unittest\n", "import unittest\nfrom solution import total\n")
LEGIT_CLASSES = (
    "from collections import namedtuple\nfrom dataclasses import dataclass\nfrom decimal import Decimal\n"
    "from fractions import Fraction\n\nclass Vec:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
    "    def __eq__(self, other):\n        return isinstance(other, Vec) and (self.x, self.y) == (other.x, other.y)\n"
    "    def __hash__(self):\n        return hash((self.x, self.y))\n\n@dataclass\nclass Pair:\n    a: int\n    b: int\n\n"
    "Point = namedtuple('Point', 'x y')\n\ndef total(xs):\n    return Vec(sum(xs), len(xs))\n\n"
    "def others():\n    return [Pair(1, 2), Point(3, 4), Fraction(1, 3), Decimal('1.5'), 0.1 + 0.2, None, True, (i for i in range(2))]\n"
)
LEGIT_TESTS = (
    "import unittest\nfrom decimal import Decimal\nfrom fractions import Fraction\nfrom unittest import mock\n\n"
    "class T(unittest.TestCase):\n    def test_vec(self):\n        self.assertEqual(total([1, 2]), Vec(3, 2))\n"
    "        self.assertTrue(total([1, 2]) == Vec(3, 2))\n        self.assertNotEqual(total([1]), Vec(3, 2))\n"
    "        self.assertIn(total([]), [Vec(0, 0)])\n        self.assertCountEqual([total([]), total([1])], [Vec(1, 1), Vec(0, 0)])\n"
    "        self.assertEqual({'x': total([]).x, 'n': 1}, {'x': mock.ANY, 'n': 1})\n"
    "    def test_others(self):\n        pair, point, third, half, close, none, yes, gen = others()\n"
    "        self.assertEqual(pair, Pair(1, 2))\n        self.assertEqual(point, (3, 4))\n"
    "        self.assertEqual(third, Fraction(1, 3))\n        self.assertEqual(half, Decimal('1.5'))\n"
    "        self.assertAlmostEqual(close, 0.3)\n        self.assertIsNone(none)\n        self.assertIs(yes, True)\n"
    "        self.assertEqual(list(gen), [0, 1])\n"
)


def test_always_equal_answers_fail_under_unittest(sandbox: DockerSandbox) -> None:
    """ho1's r185 and s046-s048: an always-equal object (a class whose __eq__ says True, an int
    subclass too) passed unittest tests 3/3, assertEqual and assertTrue(x == y) alike: only the
    asserts' == was checked. A legit class with a sensible __eq__ (and a dataclass, a namedtuple,
    Fraction, Decimal, a float, a generator, None, mock.ANY in the tests) still passes."""
    cases = [
        ("always-equal via assertEqual", row(ANY + "def total(xs):\n    return _Any()\n", TOTAL_TESTS, "total"), "fail"),
        ("always-equal via assertTrue(x == y)", row(ANY + "def total(xs):\n    return _Any()\n", ASSERT_TRUE_ONLY, "total"), "fail"),
        ("an int subclass always equal", row(ALWAYS_INT + "def total(xs):\n    return _I(len(xs))\n", TOTAL_TESTS, "total"), "fail"),
        ("from solution import total", row(ANY + "def total(xs):\n    return 0 if False else _Any()\n", FROM_SOLUTION, "total"), "fail"),
        ("from a method: assertListEqual, assertIn, assertCountEqual...", row(METHOD_ANY, METHOD_TESTS, "Box.get"), "fail"),
        ("a legit class with __eq__ and other legit answers", row(LEGIT_CLASSES, LEGIT_TESTS, "total"), "pass"),
        ("the right total", row("def total(xs):\n    return sum(xs)\n", TOTAL_TESTS, "total"), "pass"),
    ]  # fmt: skip
    verdicts = CodeVerifier(sandbox).verify_many([r for _, r, _ in cases])
    got = {name: v.verdict for (name, _, _), v in zip(cases, verdicts, strict=True)}
    assert got == {name: expected for name, _, expected in cases}
    evidence = [v.evidence for v in verdicts]
    assert (evidence[0]["assertions_passed"], evidence[0]["assertions_total"]) == (0, 3)
    assert "returned an always-equal object (a _Any" in evidence[0]["stderr_tail"]
    assert (evidence[4]["assertions_passed"], evidence[4]["assertions_total"]) == (0, 5)
