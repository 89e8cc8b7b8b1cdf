"""Prompt templates: a placement-only template renders by joining its pieces, exactly as Jinja
would; anything else, and any value that is not a string, goes through Jinja."""

from __future__ import annotations

from pathlib import Path

import jinja2
import jinja2.meta
import pytest

from ptfactory.annotators.judges.llm import TEMPLATES as JUDGE_TEMPLATES
from ptfactory.generators.prompts import _DIR, template

ODD = "  {{ not a tag }} {% if x %} <b>&amp;</b>\n\t'quotes' \"and\" ünïcödé \\n  "


@pytest.mark.parametrize("path", sorted([*_DIR.glob("*.jinja"), *JUDGE_TEMPLATES.glob("*.jinja")]))
def test_every_bundled_template_renders_as_jinja_does(path: Path) -> None:
    loaded = template(path.stem, path.parent)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
    names = jinja2.meta.find_undeclared_variables(env.parse(path.read_text(encoding="utf-8")))
    if loaded._pieces is None:
        return  # the Jinja path itself (self_instruct loops over its examples)
    for value in (ODD, "", "x" * 5000):
        values = {n: f"{n}:{value}" for n in names}
        assert loaded.render(**values) == loaded._template.render(**values).strip()


def test_what_is_not_plain_placement_goes_through_jinja(tmp_path: Path) -> None:
    (tmp_path / "plain.jinja").write_text("Q: {{ q }}\nA: {{a}}\n")
    (tmp_path / "filtered.jinja").write_text("Q: {{ q | upper }}\n")
    (tmp_path / "branch.jinja").write_text("{% if q %}Q: {{ q }}{% endif %}\n")
    plain = template("plain", tmp_path)
    assert plain._pieces == ((False, "Q: "), (True, "q"), (False, "\nA: "), (True, "a"))
    assert plain.render(q=ODD, a="b") == f"Q: {ODD}\nA: b".strip()
    assert plain.render(q=3, a=None) == "Q: 3\nA: None"  # not strings: Jinja's own str()
    with pytest.raises(jinja2.UndefinedError, match="'a' is undefined"):
        plain.render(q="x")
    assert template("filtered", tmp_path)._pieces is None
    assert template("filtered", tmp_path).render(q="hi") == "Q: HI"
    assert template("branch", tmp_path)._pieces is None
    assert template("branch", tmp_path).render(q="") == ""
