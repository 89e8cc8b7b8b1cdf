"""The README is the front door: short, readable, no dated timings, and every link it gives resolves."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_readme_is_short_with_short_lines_and_no_dated_timings() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move reference material to docs/"
    long = [(n, len(line)) for n, line in enumerate(lines, 1) if len(line) > 110]
    assert not long, f"README.md lines over 110 characters (line, length): {long}"
    text = "\n".join(lines)
    dated = re.findall(r"\b20\d\d-\d\d-\d\d\b", text)
    assert not dated, f"dated figures belong in docs/benchmarks.md, not the README: {dated}"


def test_every_relative_link_in_readme_and_docs_resolves() -> None:
    broken = []
    for page in [README, *sorted((REPO / "docs").glob("*.md"))]:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert not broken, f"links to missing files: {broken}"
