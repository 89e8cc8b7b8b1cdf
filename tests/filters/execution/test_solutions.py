"""Reading the code to test from a reply (parsing only, nothing runs): fences of other languages,
CRLF, fences indented in a list item, a helper or the imports in a block of their own, a corrected
second version, the prompt's helpers, ``from __future__`` first; entry points as tables write them;
the function tests call when no entry point is named."""

from __future__ import annotations

import pytest

from ptfactory.filters.execution.programs import code_blocks, entry_name, extract_solution, program
from ptfactory.filters.execution.solutions import MISSING_ENTRY_POINT
from ptfactory.generators.seed_tests import called_entry

INC = "def inc(x):\n    return x + 1\n"


def test_fences_pair_with_their_own_closing_line() -> None:
    reply = "Example:\n```text\nin: 1\nout: 2\n```\nCode:\n```python\n" + INC + "```\nDone."
    assert code_blocks(reply) == [INC]
    assert code_blocks(reply.replace("```text", "```bash")) == [INC]
    assert extract_solution("Write inc.", reply.replace("\n", "\r\n"), "inc") == INC  # CRLF
    listed = (
        "Steps:\n\n1. Define it:\n\n   ```python\n   def inc(x):\n       return x + 1\n   ```\n\n2. Call it."
    )
    assert extract_solution("Write inc.", listed, "inc") == INC


def test_the_reply_s_other_blocks_and_the_prompt_s_helpers_come_along() -> None:
    helper = "```python\nfrom collections import Counter\n\ndef one(x):\n    return 1\n```\n"
    main = "```python\ndef inc(x):\n    return x + one(x)\n```\n"
    code = extract_solution("Write inc.", "First:\n" + helper + "Then:\n" + main, "inc")
    compile(code, "solution.py", "exec")
    assert code.index("from collections import Counter") < code.index("def one") < code.index("def inc")
    # a corrected version after a first attempt: the last block that defines the entry point
    first, fixed = (
        "```python\ndef inc(x):\n    return x\n```",
        "```python\ndef inc(x):\n    return x + 1\n```",
    )
    assert extract_solution("Write inc.", f"{first}\nOops, corrected:\n{fixed}", "inc").strip() == INC.strip()
    prompt = 'def one(x):\n    return 1\n\n\ndef inc(x):\n    """Add one()."""\n'
    with_helper = extract_solution(prompt, "```python\ndef inc(x):\n    return x + one(x)\n```", "inc")
    assert "def one(x):\n    return 1" in with_helper and '"""Add one()."""' not in with_helper
    future = (
        "```python\nfrom __future__ import annotations\n\ndef inc(x: list[int]) -> int:\n    return 1\n```"
    )
    code = extract_solution(
        "from typing import List\n\ndef inc(x: List[int]) -> int:\n    pass\n", future, "inc"
    )
    assert code.startswith("from __future__ import annotations\n") and "from typing import List" in code
    compile(code, "solution.py", "exec")


@pytest.mark.parametrize(
    ("written", "name"),
    [("multiply", "multiply"), ("multiply()", "multiply"), ("solution.multiply", "multiply"),
     (" multiply ", "multiply"), ("Solution.twoSum", "twoSum")],
)  # fmt: skip
def test_entry_points_as_tables_write_them(written: str, name: str) -> None:
    assert entry_name(written) == name


def test_the_function_the_tests_call() -> None:
    assert called_entry("assert minimum(1, 2) == 1\n") == "minimum"
    check = "def check():\n    assert add3(1, 2, 3) == 6\n\ncheck()\n"
    assert called_entry(check) == "add3"
    unit = "import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(fib(3), 2)\n"
    assert called_entry(unit) == "fib"
    assert (
        called_entry("def check(candidate):\n    assert candidate(1) == 2\n") is None
    )  # HumanEval: none named


def test_every_block_counts_in_order() -> None:
    """ho9 R06, R61, R34, R03: a fix block that redefines only a helper wins; a fix that relies on
    the first block's import keeps it; a constant built with a call in its own block comes along
    (a demo assignment that calls the reply's function does not); an unfenced reply's code is
    taken without the prose around it."""
    first = (
        "```python\ndef _big(a, b):\n    return min(a, b)\n\ndef top(v):\n    return _big(v[0], v[1])\n```\n"
    )
    fix = "Fix the helper:\n```python\ndef _big(a, b):\n    return max(a, b)\n```\n"
    code = extract_solution("Write top.", first + fix, "top")
    assert code.index("min(a, b)") < code.index("def top") < code.index("max(a, b)")
    imports = "```python\nfrom collections import Counter\n\ndef top(t):\n    return Counter(t)\n```\n"
    fixed = "Better:\n```python\ndef top(t):\n    return sorted(Counter(t))\n```\n"
    code = extract_solution("Write top.", imports + fixed, "top")
    assert code.startswith("from collections import Counter") and code.count("def top") == 1
    constant = "```python\nVOWELS = set('aeiou')\nPAT = re.compile('a')\n```\n"
    usage = (
        "```python\ndef count(s):\n    return len(VOWELS)\n```\n```python\nn = count('x')\nprint(n)\n```\n"
    )
    code = extract_solution("Write count.", constant + usage, "count")
    assert "VOWELS = set('aeiou')" in code and "PAT = re.compile" in code
    assert "n = count" not in code and "print(n)" not in code
    test_block = (
        "```python\nimport pytest\nfrom solution import count\n\ndef test_it():\n    assert count('a')\n```\n"
    )
    assert "import" not in extract_solution("Write count.", usage + test_block, "count")
    prose = "Here is the completed function:\n\ndef inc(x):\n    return x + 1\n\nIt adds one to x.\n"
    assert extract_solution("Write inc.", prose, "inc").strip() == INC.strip()


def test_an_example_block_s_imports_and_a_recap_stub_do_not_break_the_solution() -> None:
    """ho3's dot/E1/E2: another block's import only an example uses (numpy to compare against, a
    made-up module) was kept as it was and failed the right solution; R5_1: a closing recap
    ``def total(...) -> int: ...`` replaced the definition."""
    solution = "```python\ndef dot(a, b):\n    return sum(x * y for x, y in zip(a, b))\n```\n"
    example = (
        "```python\nimport numpy as np\nfrom mystats import fast_mean\n\nv = np.array([1, 2])\n\n"
        "def dot_np(a, b):\n    return np.dot(a, b)\n\nprint(dot_np(v, v))\n```\n"
    )
    code = extract_solution("Write dot.", solution + "Compare:\n" + example, "dot")
    namespace: dict[str, object] = {}
    exec(compile(code, "solution.py", "exec"), namespace)  # no numpy, no mystats: still loads
    assert namespace["dot"]([1, 2], [3, 4]) == 11  # type: ignore[operator]
    # an import the chosen block (or a helper it calls) uses stays as it was
    helper = "```python\nimport numpy as np\n\ndef _dot(a, b):\n    return np.dot(a, b)\n```\n"
    uses = "```python\ndef dot(a, b):\n    return int(_dot(a, b))\n```\n"
    assert "\nimport numpy as np\n" in "\n" + extract_solution("Write dot.", helper + uses, "dot")
    recap = "Signature:\n```python\ndef dot(a: list, b: list) -> int: ...\n```\n"
    code = extract_solution("Write dot.", solution + recap, "dot")
    namespace = {}
    exec(compile(code, "solution.py", "exec"), namespace)
    assert namespace["dot"]([1, 2], [3, 4]) == 11  # type: ignore[operator]


SLOW = "Here is a slow one:\n\n```python\ndef inc(x):\n    y = x\n    y += 1\n    return y\n```\n\nMake it faster."


def test_the_prompt_s_written_out_entry_point_is_never_the_reply_s() -> None:
    """ho11's ex4_prompt_code: a reply that renamed the function (or only talked) had the prompt's
    own ``inc`` tested, and one that made it a method had the prompt's come along as a helper."""
    assert (
        extract_solution(SLOW, "```python\ndef inc_fast(x):\n    return x\n```", "inc") == MISSING_ENTRY_POINT
    )
    assert extract_solution(SLOW, "Use x + 1: one addition.", "inc") == MISSING_ENTRY_POINT
    method = extract_solution(
        SLOW, "```python\nclass Solution:\n    def inc(self, x):\n        return x\n```", "inc"
    )
    assert "y += 1" not in method and "class Solution" in method
    # a stub to complete still takes the reply's body (`raise NotImplementedError`, HumanEval/115's
    # `import math` before the docstring too)
    for body in (
        '    """Add one."""\n',
        "    raise NotImplementedError\n",
        "    ...\n",
        "    import math\n    pass\n",
    ):
        prompt = "def inc(x):\n" + body
        assert extract_solution(prompt, "    return x + 1\n", "inc") == prompt + "    return x + 1\n"
    assert "\nrun(None, " in program(
        MISSING_ENTRY_POINT, "assert inc(1) == 2\n", "inc"
    )  # the harness abstains
    assert "\nrun(None, " not in program(
        extract_solution(SLOW, "```python\n" + INC + "```", "inc"), "", "inc"
    )


def test_a_rebinding_block_and_a_mistake_shown_are_not_the_solution() -> None:
    """ho11's ex3_lru_cache_rebind_block, ex_common_mistake_after and ex3_pandas_chain_example:
    a later ``inc = lru_cache()(inc)`` block replaced the definition (NameError), a block shown as
    "A common mistake is..." was taken as the solution, and an example's ``scores = data[...]``
    (``data`` from the dropped ``pd.read_csv``) stayed and raised."""
    first = "Here:\n```python\n" + INC + "```\n"
    cache = (
        "Cache it:\n```python\nfrom functools import lru_cache\n\ninc = lru_cache(maxsize=None)(inc)\n```\n"
    )
    for lead in ("A common mistake is to add two:", "Don't do this:", "**Wrong:**", "❌ Bad example:"):
        mistake = f"{lead}\n```python\ndef inc(x):\n    return x + 2\n```\nUse the first."
        assert extract_solution("Write inc.", first + mistake, "inc") == INC
    fixed = "That was wrong. Here is the corrected version:\n```python\ndef inc(x):\n    return x + 1  # fixed\n```"
    assert "# fixed" in extract_solution(
        "Write inc.", "```python\ndef inc(x):\n    return x\n```\n" + fixed, "inc"
    )
    pandas = "With pandas:\n```python\nimport pandas as pd\ndata = pd.read_csv('a.csv')\nxs = data['x'].tolist()\nprint(inc(xs[0]))\n```"
    for reply in (first + cache, first + pandas):
        namespace: dict[str, object] = {}
        exec(compile(extract_solution("Write inc.", reply, "inc"), "solution.py", "exec"), namespace)
        assert namespace["inc"](1) == 2  # type: ignore[operator]
    remedy = (
        "To avoid a common mistake, dedupe first:\n```python\ndef inc(x):\n    return x + 1  # fixed\n```"
    )
    assert "# fixed" in extract_solution(
        "Write inc.", "```python\ndef inc(x):\n    return x\n```\n" + remedy, "inc"
    )
    only = "A common mistake:\n```python\ndef inc(x):\n    return x + 2\n```"  # nothing else: still read
    assert "x + 2" in extract_solution("Write inc.", only, "inc")
