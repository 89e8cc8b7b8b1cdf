"""ho3's findings on the execution harness, through the code verifier and the real Docker sandbox:
a test the harness cannot call (a pytest fixture argument, ``async def``) made the rest pass (now
pytest's ``capsys``, ``tmp_path``, ``monkeypatch`` and the tests' own fixtures are given), and a test with a default, a ``mock.patch`` decorator or a parametrized method was left out; right
replies failed on pytest's xunit hooks, a top-level stdin demo's later lines, the reply's own
``import pytest``, fenced tests, a doctest transcript and ``from add_module import add``. Each case
is a row of one batch."""

from __future__ import annotations

from typing import Any

import pytest

from ptfactory.filters.execution.docker_sandbox import DockerSandbox
from tests.filters.execution.cases import code_row, judged

pytestmark = pytest.mark.integration

DOUBLE = "def double(x):\n    return 2 * x\n"
ABS_DOUBLE = "def double(x):\n    return abs(2 * x)\n"


def row(reply: str, tests: str, entry: str = "double") -> dict[str, Any]:
    return code_row(reply, tests, entry)


FIXTURE_ARG = (
    "def test_basic():\n    assert double(1) == 2\n\ndef test_neg(caplog):\n    assert double(-3) == -6\n"
)
OWN_FIXTURES = (
    "import builtins\n\ndef show(x):\n    print(double(x))\n\ndef test_printed(capsys):\n    show(-3)\n"
    "    out, err = capsys.readouterr()\n    assert out == '-6\\n' and capsys.readouterr().out == ''\n\n"
    "def test_file(tmp_path):\n    (tmp_path / 'x.txt').write_text('-4')\n"
    "    assert double(int((tmp_path / 'x.txt').read_text())) == -8\n\n"
    "def test_input(monkeypatch):\n    monkeypatch.setattr('builtins.input', lambda *a: '-5')\n"
    "    monkeypatch.setenv('N', '-1')\n    assert double(int(input())) == -10\n    assert double(int(__import__('os').environ['N'])) == -2\n\n"
    "def test_undone():\n    assert builtins.input is not None and 'N' not in __import__('os').environ\n"
)
ASYNC = "async def test_it():\n    assert double(-3) == -6\n\ndef test_basic():\n    assert double(1) == 2\n"
DEFAULT = "def test_basic():\n    assert double(1) == 2\n\ndef test_neg(x=-3):\n    assert double(x) == -6\n"
PATCHED = (
    "from unittest.mock import patch\n\ndef read_and_double():\n    return double(int(input()))\n\n"
    "def test_basic():\n    assert double(1) == 2\n\n@patch('builtins.input', return_value='-3')\n"
    "def test_read(mock_input):\n    assert read_and_double() == -6\n    mock_input.assert_called_once()\n"
)
CLASS_PARAMETRIZE = (
    "import pytest\n\nclass TestDouble:\n    def test_basic(self):\n        assert double(1) == 2\n\n"
    "    @pytest.mark.parametrize('x, want', [(3, 6), (-2, -4)])\n    def test_many(self, x, want):\n"
    "        assert double(x) == want\n"
)
USER_FIXTURES = (
    "import pytest\n\nlog = []\n\n@pytest.fixture\ndef base():\n    return 3\n\n@pytest.fixture()\ndef pair(base):\n"
    "    yield (base, 2 * base)\n    log.append('torn down')\n\n@pytest.fixture(scope='module')\ndef once():\n"
    "    log.append('once')\n    return -1\n\ndef test_pair(pair, once):\n    assert double(pair[0]) == pair[1]\n"
    "    assert double(once) == -2\n\ndef test_after(once):\n    assert log == ['once', 'torn down']\n\n"
    "class TestAuto:\n    @pytest.fixture(autouse=True)\n    def _setup(self):\n        self.n = -4\n\n"
    "    def test_it(self):\n        assert double(self.n) == -8\n"
)
PARAM_FIXTURE = (
    "import pytest\n\n@pytest.fixture(params=[1, -2])\ndef x(request):\n    return request.param\n\n"
    "def test_basic():\n    assert double(1) == 2\n\ndef test_x(x):\n    assert double(x) == 2 * x\n"
)
HELPER = "def test_case(x, want):\n    assert double(x) == want\n\ntest_case(3, 6)\ntest_case(-1, -2)\n"
CASE_PATCHED = (
    "import unittest\nfrom unittest.mock import patch\n\n@patch('builtins.input', return_value='-3')\n"
    "class T(unittest.TestCase):\n    def test_read(self, mock_input):\n        self.assertEqual(double(int(input())), -6)\n\n"
    "class U(unittest.TestCase):\n    @patch('builtins.input', side_effect=['-4'])\n    def test_read(self, _):\n"
    "        self.assertEqual(double(int(input())), -8)\n"
)


def test_no_test_is_silently_left_out(sandbox: DockerSandbox) -> None:
    """Each wrong row passed before (only test_basic ran); a test that takes a fixture abstains
    (naming it) unless another failed; one the harness can call is called."""
    cases = [
        ("another fixture's argument, the rest pass", row(ABS_DOUBLE, FIXTURE_ARG), "abstain"),
        ("another fixture's argument, another test fails", row("def double(x):\n    return 3\n", FIXTURE_ARG), "fail"),
        ("capsys, tmp_path, monkeypatch", row(DOUBLE, OWN_FIXTURES), "pass"),
        ("capsys, tmp_path, monkeypatch, wrong", row(ABS_DOUBLE, OWN_FIXTURES), "fail"),
        ("an async test", row(ABS_DOUBLE, ASYNC), "abstain"),
        ("a default, wrong", row(ABS_DOUBLE, DEFAULT), "fail"),
        ("a default, right", row(DOUBLE, DEFAULT), "pass"),
        ("@patch on a test function, wrong", row(ABS_DOUBLE, PATCHED), "fail"),
        ("@patch on a test function, right", row(DOUBLE, PATCHED), "pass"),
        ("parametrize on a method, wrong", row(ABS_DOUBLE, CLASS_PARAMETRIZE), "fail"),
        ("parametrize on a method, right", row(DOUBLE, CLASS_PARAMETRIZE), "pass"),
        ("@patch on a TestCase and its method, wrong", row(ABS_DOUBLE, CASE_PATCHED), "fail"),
        ("@patch on a TestCase and its method, right", row(DOUBLE, CASE_PATCHED), "pass"),
        ("a helper test_case(x, want) the tests call", row(DOUBLE, HELPER), "pass"),
        ("the tests' own fixtures (yield, autouse, scope)", row(DOUBLE, USER_FIXTURES), "pass"),
        ("the tests' own fixtures, wrong", row(ABS_DOUBLE, USER_FIXTURES), "fail"),
        ("a parametrized fixture", row(ABS_DOUBLE, PARAM_FIXTURE), "abstain"),
    ]  # fmt: skip
    verdicts = judged(sandbox, cases)
    fixture = verdicts["another fixture's argument, the rest pass"]
    assert fixture.reason == "unsupported_test_feature"
    assert fixture.evidence["detail"] == "abstain: unsupported:test_neg(caplog)"
    assert verdicts["capsys, tmp_path, monkeypatch, wrong"].evidence["assertions_passed"] == 1  # test_undone
    assert verdicts["a parametrized fixture"].evidence["detail"] == "abstain: unsupported:test_x(x)"
    assert verdicts["the tests' own fixtures (yield, autouse, scope)"].evidence["assertions_total"] == 4
    assert verdicts["an async test"].evidence["detail"] == "abstain: unsupported:test_it(async)"
    assert verdicts["parametrize on a method, right"].evidence["assertions_total"] == 3


XUNIT = (
    "DATA = None\nstate = {}\n\ndef setup_module(module):\n    global DATA\n    DATA = [5, 3, 8]\n\n"
    "def setup_function(function):\n    state['xs'] = [1, 9, 4]\n\ndef teardown_function():\n    state.clear()\n\n"
    "def test_module():\n    assert double(DATA[0]) == 10\n\ndef test_function():\n    assert double(state['xs'][1]) == 18\n\n"
    "class TestHooks:\n    @classmethod\n    def setup_class(cls):\n        cls.items = [3, 1]\n\n"
    "    def setup_method(self):\n        self.n = 4\n\n    def teardown_method(self, method):\n        self.n = None\n\n"
    "    def test_class(self):\n        assert double(self.items[0]) == 6\n\n"
    "    def test_method(self):\n        assert double(self.n) == 8\n"
)
STDIN_DEMOS = {
    "input() lines": DOUBLE + "n = int(input())\narr = list(map(int, input().split()))\nprint([double(x) for x in arr])\n",
    "sys.stdin.read()": "import sys\n" + DOUBLE + "data = sys.stdin.read().split()\nnums = [int(x) for x in data[1:]]\nprint(double(nums[0]))\n",
    "readlines() then if": "import sys\n" + DOUBLE + "lines = sys.stdin.readlines()\nif lines:\n    print(double(int(lines[0])))\n",
    "input() then a chain": DOUBLE + "line = input('x: ')\nn = double(int(line))\nprint(f'{n} doubled')\n",
}  # fmt: skip
OWN_PYTEST = (
    "```python\nimport pytest\nfrom pytest import approx\n\n"
    + DOUBLE
    + "\ndef test_double():\n    assert double(2) == approx(4)\n```"
)
TESTS = "assert double(3) == 6\nassert double(-1) == -2\n"


def test_right_replies_in_shapes_the_harness_misread_pass(sandbox: DockerSandbox) -> None:
    """Each failed before: the hooks were not called (or called with an argument they do not
    take), the demo's later lines raised NameError, the reply's `import pytest` found no module,
    the tests' fences and a doctest transcript were a SyntaxError."""
    cases = [
        ("xunit hooks", row(DOUBLE, XUNIT), "pass"),
        ("xunit hooks, wrong", row("def double(x):\n    return 0 if x == 4 else 2 * x\n", XUNIT), "fail"),
        *((f"a stdin demo: {name}", row(code, TESTS), "pass") for name, code in STDIN_DEMOS.items()),
        ("the reply's own import pytest", row(OWN_PYTEST, TESTS), "pass"),
        ("fenced tests", row(DOUBLE, "Tests:\n```python\n" + TESTS + "```\n"), "pass"),
        ("fenced tests, wrong", row(ABS_DOUBLE, "```python\n" + TESTS + "```"), "fail"),
        ("a doctest transcript", row(DOUBLE, ">>> double(3)\n6\n>>> double(-1)\n-2\n"), "pass"),
        ("a doctest transcript, wrong", row(ABS_DOUBLE, ">>> double(3)\n6\n>>> double(-1)\n-2\n"), "fail"),
        ("tests that are prose", row(DOUBLE, "Check that double doubles its input.\n"), "abstain"),
        ("the entry point from a module named for the task", row(DOUBLE, "from double_module import double\n" + TESTS), "pass"),
        ("... as a reference under another name: not the solution", row(DOUBLE, "from ref import double as r\nassert double(2) == r(2)\n"), "fail"),
    ]  # fmt: skip
    verdicts = judged(sandbox, cases)
    assert verdicts["a doctest transcript"].evidence["assertions_total"] == 2
    assert verdicts["tests that are prose"].evidence["detail"] == "abstain: unsupported:tests_invalid"
    assert (
        verdicts["fenced tests, wrong"]
        .evidence["failed_checks"][0]
        .startswith("tests.py:3: assert double(-1)")
    )
