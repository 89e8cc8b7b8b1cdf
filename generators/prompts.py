"""Jinja prompt templates, loaded once; each has an id and a content hash for provenance.

A template that only places variables between its text (no filter, test, loop or condition: the
judges' rubric and pairwise prompts) renders by joining its pieces with the values, which is what
Jinja outputs for string values, without Jinja building a context per call (two thirds of the
time at 200k pairwise prompts). Any other template, or a value that is not a string, goes through
Jinja.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

__all__ = ["Template", "template"]

_DIR = Path(__file__).parent / "templates"


# a piece of a placement-only template: its literal text, or the name of a variable placed there
Piece = tuple[bool, str]  # (is_variable, text or name)


@dataclass(frozen=True)
class Template:
    id: str
    hash: str
    _template: jinja2.Template
    _pieces: tuple[Piece, ...] | None = None  # None: the template does more than place variables

    def render(self, **values: Any) -> str:
        # every value a string (checked on the few values, not the many pieces)
        if self._pieces is not None and all(type(v) is str for v in values.values()):
            try:
                return "".join(
                    [values[text] if variable else text for variable, text in self._pieces]
                ).strip()
            except KeyError:  # a missing value: Jinja's StrictUndefined error, with its message
                pass
        return self._template.render(**values).strip()


@functools.cache
def _environment(folder: Path) -> jinja2.Environment:
    # prompts are plain text for a model, not HTML: no autoescape
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder), undefined=jinja2.StrictUndefined, autoescape=False
    )


@functools.cache
def template(name: str, folder: Path = _DIR) -> Template:
    """``<folder>/<name>.jinja`` (default: generators/templates); its hash changes when its text does."""
    path = folder / f"{name}.jinja"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    environment = _environment(folder)
    loaded = environment.get_template(path.name)
    return Template(name, digest, loaded, _placement_pieces(environment, path.read_text(encoding="utf-8")))


def _placement_pieces(environment: jinja2.Environment, source: str) -> tuple[Piece, ...] | None:
    """The template as literal text and plain ``{{ name }}`` placements, or None when its syntax
    tree holds anything else (a filter, an attribute, a tag, an expression)."""
    from jinja2 import nodes

    pieces: list[Piece] = []
    for node in environment.parse(source).body:
        if not isinstance(node, nodes.Output):
            return None
        for child in node.nodes:
            if isinstance(child, nodes.TemplateData):
                pieces.append((False, str(child.data)))
            elif isinstance(child, nodes.Name) and child.ctx == "load":
                pieces.append((True, str(child.name)))
            else:
                return None
    return tuple(pieces)
