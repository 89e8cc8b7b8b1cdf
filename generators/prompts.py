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


@dataclass(frozen=True)
class Template:
    id: str
    hash: str
    _template: jinja2.Template

    def render(self, **values: Any) -> str:
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
    return Template(name, digest, _environment(folder).get_template(path.name))
