"""The code to test, read from a model's reply: its fenced blocks, the entry point's definition and
what that needs from the rest of the reply and from the prompt. Parsing only: nothing here runs
the code (the host never does)."""

from __future__ import annotations

import ast
import re

__all__ = ["MISSING_ENTRY_POINT", "code_blocks", "entry_name", "extract_solution", "infer_entry_point"]

# what extract_solution gives for a reply that defines no entry point when the prompt's own
# definition of it is written out (code to rewrite): the prompt's function is not the reply's to
# test; programs.program() makes it a run that abstains (``unsupported:missing_entry_point``)
MISSING_ENTRY_POINT = "# ptf: the reply defines no entry point; the prompt's own is not the reply's\n"

# a fence line: its indentation, the backticks, a tag ("python", "Python3", " py", "text", none)
_FENCE_LINE = re.compile(r"^([ \t]*)(`{3,})[ \t]*([\w+#.-]*)[^`\n]*$")
_PYTHON_TAGS = ("", "python", "python3", "py", "py3")
# a block defines the entry point: a def (async too), a class, or a top-level assignment
_DEFINES = r"^\s*(?:async\s+)?def\s+{name}\s*\(|^\s*class\s+{name}\b|^{name}\s*="
_KEPT = (
    ast.Import,
    ast.ImportFrom,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Assign,
    ast.AnnAssign,
)


def _fenced(text: str) -> list[tuple[str, str, str]]:
    """Every fenced block of ``text`` as (tag, code, the last line of prose before it), in order,
    each fence paired with its own closing line (a ```` ```text ```` block before the code does not
    shift the pairing); a fence indented in a list item has its indentation taken off its lines; an
    unclosed last fence runs to the end of the text."""
    blocks: list[tuple[str, str, str]] = []
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    index = 0
    prose = ""
    while index < len(lines):
        opened = _FENCE_LINE.match(lines[index])
        inline = None if opened else re.match(r"^.*?```[ \t]*(python3?|py)[ \t]*$", lines[index], re.I)
        if not opened and not inline:
            prose = lines[index].strip() or prose
            index += 1
            continue
        if inline:
            prose = lines[index].strip()
        indent, ticks, tag = (
            (opened.group(1), opened.group(2), opened.group(3)) if opened else ("", "```", "")
        )
        if inline:
            tag = inline.group(1)
        body: list[str] = []
        index += 1
        while index < len(lines):
            line = lines[index]
            stripped = line.strip()
            if stripped.startswith(ticks) and not stripped.strip("`"):
                break
            if stripped.endswith("```") and not stripped.startswith("```"):  # code```: closes the block
                body.append(line.rstrip()[:-3])
                break
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            index += 1
        index += 1
        blocks.append((tag.lower(), "\n".join(body) + "\n", prose))
        prose = ""
    return blocks


def code_blocks(text: str) -> list[str]:
    """The fenced Python (or untagged) code blocks of a text, in order (generation and the
    rewards read code through this too)."""
    return [code for tag, code, _ in _fenced(text) if tag in _PYTHON_TAGS]


# the line before a block saying it shows what not to do: "A common mistake is...:", "Don't do
# this:", "Wrong:", "❌ Bad example:", "What not to do:"; not one that leads to the fix ("To avoid a
# common mistake, dedupe first:", "The corrected version:")
_CAUTION = re.compile(
    r"common (?:mistake|pitfall|error|bug)|\b(?:don'?t|do not|never) (?:do|write) (?:this|that|it)\b"
    r"|what not to do|anti-?pattern|^\W*(?:wrong|incorrect|bad|buggy|broken)"
    r"(?: (?:example|version|approach|code|way|implementation|solution))?\W*:\W*$",
    re.I,
)
_REMEDY = re.compile(r"\b(?:avoid\w*|instead|correct\w*|fix\w*|right|proper\w*|better)\b", re.I)


def _cautioned(text: str) -> list[bool]:
    """For each of ``code_blocks(text)``: the prose just before it introduces it as a mistake."""
    return [
        bool(_CAUTION.search(prose)) and not _REMEDY.search(prose)
        for tag, _, prose in _fenced(text)
        if tag in _PYTHON_TAGS
    ]


def entry_name(entry_point: str | None) -> str | None:
    """The function name in an entry point as tables write it: ``" multiply "``, ``multiply()``,
    ``solution.multiply`` and ``Solution.twoSum`` (a method: the harness binds it on an instance)
    name ``multiply`` and ``twoSum``; anything else is left as it is."""
    if entry_point is None:
        return None
    name = entry_point.strip()
    name = re.sub(r"\(.*\)\s*$", "", name).strip()
    last = name.rsplit(".", 1)[-1]
    return last if last.isidentifier() else entry_point


def _stub(prompt: str) -> str:
    """The function stub in a prompt (the code block of a templated prompt, else the prompt itself)."""
    blocks = code_blocks(prompt)
    return blocks[0] if blocks else prompt.replace("\r\n", "\n")


def _parts(code: str) -> list[tuple[ast.stmt, str]]:
    """The top-level imports, definitions and assignments of ``code`` with their source (decorators
    included); none when it does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    lines = code.splitlines()
    found: list[tuple[ast.stmt, str]] = []
    for node in tree.body:
        if isinstance(node, _KEPT):
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            found.append((node, "\n".join(lines[first - 1 : node.end_lineno])))
    return found


def _names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return {n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)}


def _body_only(node: ast.stmt) -> bool:
    """A stub: a function whose body is only a docstring, ``pass``, ``...``, ``raise
    NotImplementedError`` or imports (HumanEval/115's ``import math`` before its docstring)."""
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    return all(
        isinstance(s, ast.Pass | ast.Import | ast.ImportFrom)
        or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        or (isinstance(s, ast.Raise) and "NotImplementedError" in _loads(s))
        for s in node.body
    )


def _written_out(prompt: str, entry_point: str) -> bool:
    """The prompt's stub defines the entry point (a function, or a method of its class) with a
    real body, not a stub to complete: code the reply was asked to rewrite or fix."""
    for node, _ in _parts(_stub(prompt)):
        for inner in [node, *(node.body if isinstance(node, ast.ClassDef) else [])]:
            if (
                isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef)
                and inner.name == entry_point
                and not _body_only(inner)
            ):
                return True
    return False


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def _unfenced(text: str) -> str:
    """An unfenced reply's code: the whole text when it parses (a HumanEval completion), else the
    longest run of lines that parses from its first top-level ``def``/``class``/import (the prose
    before and after it left out: "Here is the function: ... It walks the list once.")."""
    if _parses(text):
        return text
    lines = text.split("\n")
    first = next(
        (i for i, line in enumerate(lines) if re.match(r"(?:async\s+def|def|class|import|from|@)\s", line)),
        None,
    )
    if first is None:
        return text
    for end in range(len(lines), first, -1):
        code = "\n".join(lines[first:end]) + "\n"
        if _parses(code):
            return code
    return text


def _calls_own(node: ast.stmt, own: set[str]) -> bool:
    """An assignment whose value calls one of the reply's own functions or classes: example usage
    (``result = f(3)``), not a constant (``VOWELS = set("aeiou")``, ``PAT = re.compile(...)``)."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in own for n in ast.walk(node)
    )


def _stubs_entry(parts: list[tuple[ast.stmt, str]], entry_point: str) -> bool:
    """A block whose definition of the entry point is a stub (a recap's ``def f(x) -> int: ...``)."""
    found = [
        n for n, _ in parts if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == entry_point
    ]
    return bool(found) and _body_only(found[-1])


def _rebinds_entry(parts: list[tuple[ast.stmt, str]], entry_point: str) -> bool:
    """A block whose every binding of the entry point is a rebinding of it (``f = lru_cache()(f)``,
    ``f = timed(f)``): it wraps the definition, it does not replace it."""
    found = [
        n for n, _ in parts if entry_point in _names(n) and not isinstance(n, ast.Import | ast.ImportFrom)
    ]
    return bool(found) and all(
        isinstance(n, ast.Assign | ast.AnnAssign) and n.value is not None and entry_point in _loads(n.value)
        for n in found
    )


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _used(chosen: str, parsed: list[list[tuple[ast.stmt, str]]], at: int) -> set[str]:
    """The names the chosen block uses (its top-level lines too), and those the other blocks'
    definitions it uses use, on."""
    try:
        used = _loads(ast.parse(chosen))
    except (SyntaxError, ValueError):
        used = {name for node, _ in parsed[at] for name in _loads(node)}
    others = [node for i, parts in enumerate(parsed) if i != at for node, _ in parts]
    grew = True
    while grew:
        grew = False
        for node in others:
            if not isinstance(node, ast.Import | ast.ImportFrom) and _names(node) & used:
                more = _loads(node) - used
                used |= more
                grew = grew or bool(more)
    return used


def _example_import(node: ast.stmt, used: set[str]) -> bool:
    """Another block's import that nothing the chosen block uses needs: an example's (``import
    numpy as np`` to compare against, a made-up helper module)."""
    return (
        isinstance(node, ast.Import | ast.ImportFrom)
        and not (isinstance(node, ast.ImportFrom) and node.module == "__future__")
        and not _names(node) & used
    )


def _guarded(text: str) -> str:
    """An example's import that may fail without failing the solution: the sandbox lacks numpy
    or pandas, a made-up module does not exist."""
    inner = "\n".join("    " + line for line in text.splitlines())
    return f"try:\n{inner}\nexcept ImportError:\n    pass"


def extract_solution(prompt: str, response: str, entry_point: str) -> str:
    """The code to test, from a model's reply or a HumanEval-style completion.

    All the reply's Python blocks, in order: the LAST block that defines ``entry_point`` whole,
    and of the others their imports, definitions and assignments (not an assignment that calls the
    reply's own functions, example usage; no bare expressions or prints), so a later block's
    definition wins (a corrected helper in a block of its own) and an earlier block's imports stay
    for a later fix (one that only an example needs, ``import numpy as np`` to compare against, inside
    ``try: ... except ImportError: pass``); a recap block's stub (``def f(x) -> int: ...``) never
    replaces the definition. Before those the prompt stub's imports and the helpers it defines in full
    (HumanEval/10's ``is_palindrome``). ``from __future__`` imports go first. A reply that is only a
    function body (a HumanEval completion) is appended to the prompt's stub, as HumanEval does; an
    unfenced reply with prose around its code gives its code lines. A block defines the entry
    point with a ``def`` (``async`` too), a ``class`` or a top-level assignment. The prompt's own
    definition of the entry point never stands in for the reply's: where it is written out (code
    to rewrite) and the reply defines none, ``MISSING_ENTRY_POINT``.
    """
    entry_point = entry_name(entry_point) or ""
    response = response.replace("\r\n", "\n")
    blocks = code_blocks(response) or [_unfenced(response)]
    defines = _DEFINES.format(name=re.escape(entry_point))
    kept = [b for b, c in zip(blocks, _cautioned(response), strict=False) if not c]
    if any(re.search(defines, b, re.M) for b in kept):
        blocks = kept  # "A common mistake is...:" and its block are no part of the solution
    defining = [i for i, b in enumerate(blocks) if entry_point and re.search(defines, b, re.M)]
    if not defining:
        if _written_out(prompt, entry_point):
            return MISSING_ENTRY_POINT  # not the prompt's own function: the reply delivered none
        return _stub(prompt).rstrip("\n") + "\n" + blocks[0]
    parsed = [_parts(block) for block in blocks]
    whole = [
        i
        for i in defining
        if not _stubs_entry(parsed[i], entry_point) and not _rebinds_entry(parsed[i], entry_point)
    ]
    at = (whole or defining)[-1]  # a recap's `def f(...): ...` does not replace the definition
    chosen = blocks[at]
    own = {
        node.name
        for parts in parsed
        for node, _ in parts
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    body: list[str] = []
    taken: set[str] = set()
    redefined = set().union(*(_names(n) for n, _ in parsed[at]))
    used = _used(chosen, parsed, at)
    examples = {  # what other blocks import for their examples only
        name
        for i, parts in enumerate(parsed)
        if i != at
        for node, _ in parts
        if _example_import(node, used)
        for name in _names(node)
    }
    for i, parts in enumerate(parsed):
        if i == at:
            body.append(chosen)
            taken |= redefined
            continue
        for node, text in parts:
            if _names(node) & {"solution", "pytest"} and isinstance(node, ast.Import | ast.ImportFrom):
                continue  # a test block's imports (the sandbox has no pytest)
            if isinstance(node, ast.ImportFrom) and node.module == "solution":
                continue
            if isinstance(node, ast.Assign | ast.AnnAssign) and _calls_own(node, own):
                continue  # a demo's `result = f(3)`
            if isinstance(node, ast.Assign | ast.AnnAssign) and _loads(node) & examples:
                examples |= _names(node)  # and what is made from it (`scores = df["s"].tolist()`)
                continue  # an example's data (`df = pd.DataFrame(...)`), which nothing chosen uses
            if (
                (i < at or _body_only(node))
                and _names(node) & redefined
                and not isinstance(node, ast.Import | ast.ImportFrom)
            ):
                continue  # a first attempt the chosen block replaces, a recap's stub
            taken |= _names(node)
            body.append(_guarded(text) if _example_import(node, used) else text)
    stub: list[str] = []
    for node, text in _parts(_stub(prompt)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            if text not in chosen:
                stub.append(text)
        elif (
            not (_names(node) & (taken | {entry_point}))  # the prompt's entry point is not the reply's
            and not _body_only(node)
            and not isinstance(node, ast.Assign | ast.AnnAssign)
        ):
            taken |= _names(node)
            stub.append(text)
    if not stub and len(body) == 1:
        return chosen
    texts = [*stub, *body]
    future = [
        line for part in texts for line in part.splitlines() if line.startswith("from __future__ import")
    ]
    rest = ["\n".join(line for line in part.splitlines() if line not in future) for part in texts]
    code = "\n".join([*dict.fromkeys(future), *rest])
    return code if code.endswith("\n") else code + "\n"


# a top-level function or class
_DEF = re.compile(r"^(?:async\s+)?(?:def\s+(\w+)\s*\(|class\s+(\w+)\b)", re.M)


def _defined(code: str) -> list[str]:
    """The top-level functions and classes ``code`` defines, in order."""
    return [function or cls for function, cls in _DEF.findall(code)]


def infer_entry_point(prompt: str, response: str) -> str | None:
    """The function a row's tests call when the row does not name it: the one top-level function
    (or class) the reply's code defines, else the last one the prompt's stub defines (a HumanEval
    prompt ends with the function to complete); None when neither settles it."""
    blocks = code_blocks(response) or [response.replace("\r\n", "\n")]
    defined = list(dict.fromkeys(name for block in blocks for name in _defined(block)))
    if len(defined) == 1:
        return defined[0]
    stub = _defined(_stub(prompt))
    if stub and (not defined or stub[-1] in defined):
        return stub[-1]
    return None
