"""Jinja prompt templates, loaded once; each has an id and a content hash for provenance."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

__all__ = ["Template", "template"]

_DIR = Path(__file__).parent / "templates"
_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(_DIR),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=False,
    autoescape=False,  # prompts are plain text for a model, not HTML
)


@dataclass(frozen=True)
class Template:
    id: str
    hash: str
    _template: jinja2.Template

    def render(self, **values: Any) -> str:
        return self._template.render(**values).strip()


@functools.cache
def template(name: str) -> Template:
    """The template ``generators/templates/<name>.jinja``; its hash changes when its text does."""
    path = _DIR / f"{name}.jinja"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return Template(name, digest, _ENV.get_template(path.name))
