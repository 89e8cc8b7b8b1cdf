"""ho11's findings on the code verifier, through the real Docker sandbox: answers equal only to
values of one type (``__eq__`` says ``isinstance(other, int)``, a ``str`` subclass, a spoofed
``__class__``) passed, since only objects equal to everything were caught; legit answers (an
IntEnum, a namedtuple, Fraction, Counter, the tests' own matchers) still pass. Each case is a row
of one batch: a sandbox run costs seconds."""

from __future__ import annotations

import pytest

from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from tests.filters.execution.cases import code_row, judged

pytestmark = pytest.mark.integration


row = code_row


def typed(kinds: str, spoof: str = "", base: str = "") -> str:
    """A class whose instances equal any value of ``kinds`` (``__class__`` reading ``spoof``)."""
    prop = f"    @property\n    def __class__(self):\n        return {spoof}\n" if spoof else ""
    return (
        f"class _T{f'({base})' if base else ''}:\n{prop}    def __eq__(self, o):\n        return isinstance(o, {kinds})\n"
        f"    def __ne__(self, o):\n        return not isinstance(o, {kinds})\n"
        f"    __hash__ = {base or 'object'}.__hash__\n\n"
    )


PRIME_CHECK = (
    "def check(candidate):\n    assert candidate(2) == True\n    assert candidate(9) == False\n"
    "    assert candidate(17) == True\n"
)
LEARNING = (
    "class _L:\n    def __eq__(self, o):\n        return isinstance(o, bool)\n    __hash__ = object.__hash__\n\n"
    "def is_prime(n):\n    return _L()\n"
)
COUNT_TESTS = "assert count([1, 2]) == 2\nassert count([]) == 0\n"
WORDS_UNITTEST = (
    "import unittest\n\nclass T(unittest.TestCase):\n    def test_eq(self):\n"
    "        self.assertEqual(words('a b a'), {'a': 2, 'b': 1})\n    def test_dict(self):\n"
    "        self.assertDictEqual(words(''), {})\n"
)
MEMBER_UNITTEST = (
    "import unittest\n\nclass T(unittest.TestCase):\n    def test_in(self):\n        self.assertIn(count([1]), [1, 7])\n"
    "    def test_count(self):\n        self.assertCountEqual([count([1]), count([])], [0, 1])\n"
)
PARAM_TESTS = (
    "import pytest\n\n@pytest.mark.parametrize('xs, want', [([1, 2], 2), ([], 0)])\n"
    "def test_count(xs, want):\n    assert count(xs) == want\n"
)
LEGIT = (
    "import enum\nfrom collections import Counter, namedtuple\nfrom fractions import Fraction\n\n"
    "class Size(enum.IntEnum):\n    S = 1\n    M = 2\n\nclass Tag(str, enum.Enum):\n    A = 'a'\n\n"
    "class Loose:\n    def __init__(self, s):\n        self.s = s\n"
    "    def __eq__(self, o):\n        return isinstance(o, str) and o.lower() == self.s.lower()\n\n"
    "P = namedtuple('P', 'x y')\n\ndef count(xs):\n    return [Size.M, Tag.A, P(1, 2), Fraction(4, 2), Counter('aab'),\n"
    "            True, 1.0, Loose('AbC'), [P(0, 0)], {'k': Size.S}, 0, -0.0, float('inf')]\n"
)
LEGIT_TESTS = (
    "from unittest import mock\nimport pytest\n\nclass AnyInt:\n    def __eq__(self, o):\n        return isinstance(o, int)\n\n"
    "def test_all():\n    size, tag, p, two, ctr, yes, one, loose, ps, d, zero, neg, inf = count([])\n"
    "    assert size == 2 and 2 == size and tag == 'a' and p == (1, 2) and two == 2 and ctr == {'a': 2, 'b': 1}\n"
    "    assert yes == 1 and one == 1 and loose == 'abc' and ps == [(0, 0)] and d == {'k': 1}\n"
    "    assert zero == False and neg == 0 and inf == float('inf') and size == AnyInt() and one == pytest.approx(1)\n"
    "    assert {'n': size} == {'n': mock.ANY} and size in [1, 2] and p in [(1, 2)] and size != 3\n"
)


def test_answers_equal_to_any_value_of_a_type_fail(sandbox: DockerSandbox) -> None:
    """Each wrong row passed before (its class says it equals any int, any str, any dict...,
    whatever the value); the legit answers pass."""
    cases = [
        ("equal to any int/bool/str...", row(typed("(bool, int, float, str, list, tuple, dict, set)") + "def is_prime(n):\n    return _T()\n", PRIME_CHECK, "is_prime"), "fail"),
        ("... with __class__ spoofed to bool", row(typed("(bool, int)", "bool") + "def is_prime(n):\n    return _T()\n", PRIME_CHECK, "is_prime"), "fail"),
        ("a learning __eq__, bools only", row(LEARNING, PRIME_CHECK, "is_prime"), "fail"),
        ("a str subclass equal to any str", row(typed("str", base="str") + "def rle(s):\n    return _T(s)\n", "assert rle('aab') == 'a2b1'\n", "rle"), "fail"),
        ("equal to any list, top-level asserts", row(typed("list") + "def count(xs):\n    return _T()\n", "assert count([1]) == [[1]]\n", "count"), "fail"),
        ("held in a list", row(typed("int") + "def count(xs):\n    return [_T()]\n", "assert count([1]) == [3]\n", "count"), "fail"),
        ("equal to any dict, assertEqual", row(typed("dict") + "def words(s):\n    return _T()\n", WORDS_UNITTEST, "words"), "fail"),
        ("... with __class__ spoofed to dict", row(typed("dict", "dict") + "def words(s):\n    return _T()\n", WORDS_UNITTEST, "words"), "fail"),
        ("equal to any int, assertIn and assertCountEqual", row(typed("int") + "def count(xs):\n    return _T()\n", MEMBER_UNITTEST, "count"), "fail"),
        ("an int spoof, parametrized", row(typed("int", "int") + "def count(xs):\n    return _T()\n", PARAM_TESTS, "count"), "fail"),
        ("an int subclass equal to any int", row(typed("int", base="int") + "def count(xs):\n    return _T(len(xs))\n", COUNT_TESTS, "count"), "fail"),
        ("legit answers and the tests' own matchers", row(LEGIT, LEGIT_TESTS, "count"), "pass"),
        ("the right count", row("def count(xs):\n    return len(xs)\n", MEMBER_UNITTEST, "count"), "pass"),
    ]  # fmt: skip
    verdicts = judged(sandbox, cases)
    first = verdicts["equal to any int/bool/str..."].evidence
    assert first["assertions_passed"] == 0
    assert "returned an always-equal object (a _T" in first["stderr_tail"]


SLOW_PRIME = (
    "Here is a slow implementation:\n\n```python\ndef is_prime(n):\n    if n < 2:\n        return False\n"
    "    for d in range(2, n):\n        if n % d == 0:\n            return False\n    return True\n```\n\n"
    "Rewrite it to be faster. Keep the name is_prime."
)
FAST_PRIME = (
    "def is_prime(n):\n    if n < 4:\n        return n > 1\n    if n % 2 == 0 or n % 3 == 0:\n        return False\n"
    "    i = 5\n    while i * i <= n:\n        if n % i == 0 or n % (i + 2) == 0:\n            return False\n"
    "        i += 6\n    return True\n"
)
HUMANEVAL_STUB = 'def is_prime(n):\n    """Whether n is prime."""\n'
HUMANEVAL_BODY = "    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))\n"


def test_the_prompt_s_own_code_is_not_the_reply_s(sandbox: DockerSandbox) -> None:
    """Each wrong row passed before: a reply that renamed the function had the prompt's own slow
    (right) ``is_prime`` tested, and one that made it a method had it come along as a helper. A
    reply without the entry point abstains; a HumanEval completion of a stub still runs."""
    renamed = "```python\ndef is_prime_fast(n):\n    return n > 1 and n % 2 == 1\n```"
    method = (
        "```python\nclass Solution:\n    def is_prime(self, n):\n        return n > 1 and n % 2 == 1\n```"
    )
    cases = [
        ("renamed, wrong", row(renamed, PRIME_CHECK, "is_prime", SLOW_PRIME), "abstain"),
        ("a method, wrong", row(method, PRIME_CHECK, "is_prime", SLOW_PRIME), "fail"),
        ("the rewrite, right", row("```python\n" + FAST_PRIME + "```", PRIME_CHECK, "is_prime", SLOW_PRIME), "pass"),
        ("a HumanEval body", row(HUMANEVAL_BODY, PRIME_CHECK, "is_prime", HUMANEVAL_STUB), "pass"),
        ("a HumanEval body, wrong", row("    return n % 2 == 1\n", PRIME_CHECK, "is_prime", HUMANEVAL_STUB), "fail"),
        ("renamed, a NotImplementedError stub", row(renamed, PRIME_CHECK, "is_prime", "def is_prime(n):\n    raise NotImplementedError\n"), "fail"),
    ]  # fmt: skip
    verdicts = judged(sandbox, cases)
    assert verdicts["renamed, wrong"].evidence["detail"] == "abstain: unsupported:missing_entry_point"
    assert verdicts["renamed, wrong"].reason == "missing_entry_point"


POOL = (
    "from multiprocessing import Pool\n\ndef _uniq(xs):\n    return set(xs)\n\ndef top(nums):\n"
    "    with Pool(2) as p:\n        parts = p.map(_uniq, [nums[::2], nums[1::2]])\n    return max(set().union(*parts))\n"
)
EXECUTOR = (
    "from concurrent.futures import ProcessPoolExecutor\n\ndef top(nums):\n"
    "    with ProcessPoolExecutor(max_workers=2) as ex:\n        return max(ex.map(max, [nums[::2], nums[1::2]]))\n"
)
TOP_TESTS = "def test_top():\n    assert top([3, 1, 4, 1, 5]) == 5\n    assert top([-2, -1]) == -1\n"
SHM_EXEC = (
    "import os, subprocess\n\ndef top(nums):\n    with open('/dev/shm/x', 'w') as f:\n        f.write('#!/bin/sh\\nexit 0\\n')\n"
    "    os.chmod('/dev/shm/x', 0o755)\n    subprocess.run(['/dev/shm/x'], check=True)\n    return max(nums)\n"
)


def test_multiprocessing_runs_in_the_sandbox(sandbox: DockerSandbox) -> None:
    """ho11's ex_processpool: a right solution with a Pool or a ProcessPoolExecutor failed
    (FileNotFoundError: the container had no /dev/shm for their semaphores). The /dev/shm it has
    now is noexec, as /work and /tmp are."""
    cases = [
        ("multiprocessing.Pool", row(POOL, TOP_TESTS, "top"), "pass"),
        ("ProcessPoolExecutor", row(EXECUTOR, TOP_TESTS, "top"), "pass"),
        ("a program run from /dev/shm", row(SHM_EXEC, TOP_TESTS, "top"), "fail"),
    ]
    verdicts = judged(sandbox, cases)
    assert "PermissionError" in verdicts["a program run from /dev/shm"].evidence["stderr_tail"]
