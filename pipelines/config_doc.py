"""docs/configuration.md, generated from the pydantic model of factory.yaml (``FactoryConfig``).

One table per top-level section, one line per key: its dotted path, type, default, allowed values
and description (the field's ``description=``, else the comment on or above its line in the
source). The defaults are read from a default ``FactoryConfig()``, so a section whose fields share
a class but not defaults (the generator and the student engine) shows each its own.

Regenerate after changing a section: ``python -m ptfactory.pipelines.config_doc``;
``--check`` exits 1 when the committed file differs (tests/test_config_doc.py runs the same check).
"""

from __future__ import annotations

import argparse
import enum
import functools
import inspect
import json
import operator
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, TypeGuard

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ptfactory.config import FactoryConfig

__all__ = ["DOC_PATH", "REGENERATE", "main", "render"]

DOC_PATH = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
REGENERATE = "python -m ptfactory.pipelines.config_doc"

_HEADER = f"""# Configuration reference (factory.yaml)

<!-- generated from ptfactory/config.py by `{REGENERATE}`; do not edit by hand -->

Every key of `factory.yaml`, one line each. Every key has a default that works on one machine, so
an empty or absent file is a valid configuration. An unknown key or a bad value stops the run with
one line naming the key and what is allowed (exit 2). Nested keys are written with dots
(`engines.generator.model` is `model:` under `generator:` under `engines:`); `[]` marks the keys of
each item of a list. Sections marked *not in the config hash* change how a run spends or measures,
not what a version holds, so they do not change the hash recorded in each manifest.
"""


def _is_model(annotation: Any) -> TypeGuard[type[BaseModel]]:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _args(annotation: Any) -> tuple[Any, ...]:
    return typing.get_args(annotation)


def _optional(annotation: Any) -> tuple[Any, bool]:
    """(the annotation without None, whether None is allowed)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [a for a in _args(annotation) if a is not type(None)]
        if len(rest) < len(_args(annotation)):
            return functools.reduce(operator.or_, rest), True
    return annotation, False


def _type_name(annotation: Any) -> str:
    inner, nullable = _optional(annotation)
    origin = typing.get_origin(inner)
    if origin is typing.Literal:
        name = type(_args(inner)[0]).__name__
    elif origin in (list, tuple, set, frozenset):
        item = _args(inner)[0]
        name = "list of items (keys below)" if _is_model(item) else f"list of {_type_name(item)}"
    elif origin is dict:
        key, value = _args(inner)
        name = f"map {_type_name(key)} → {_type_name(value)}"
    elif origin in (typing.Union, types.UnionType):
        name = " or ".join(_type_name(a) for a in _args(inner))
    elif _is_model(inner):
        name = "section"
    elif inner is Path:
        name = "path"
    elif isinstance(inner, type):
        name = inner.__name__
    else:
        name = str(inner)
    return f"{name} or null" if nullable else name


def _literals(annotation: Any) -> list[str]:
    """Every Literal value or enum member inside ``annotation`` (through Optional, list, dict)."""
    if typing.get_origin(annotation) is typing.Literal:
        return [str(a) for a in _args(annotation)]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [str(m.value) for m in annotation]
    found: list[str] = []
    for arg in _args(annotation):
        found += [v for v in _literals(arg) if v not in found]
    return found


_BOUNDS = (
    (annotated_types.Gt, "gt", "> {}"),
    (annotated_types.Ge, "ge", "≥ {}"),
    (annotated_types.Lt, "lt", "< {}"),
    (annotated_types.Le, "le", "≤ {}"),
    (annotated_types.MinLen, "min_length", "at least {} item(s)"),
    (annotated_types.MaxLen, "max_length", "at most {} item(s)"),
)


def _allowed(field: FieldInfo) -> str:
    parts: list[str] = []
    values = _literals(field.annotation)
    if values:
        parts.append(", ".join(f"`{v}`" for v in values))
    text_field = _optional(field.annotation)[0] is str
    for meta in field.metadata:
        for kind, attr, text in _BOUNDS:
            if isinstance(meta, kind):
                bound = text.format(getattr(meta, attr))
                parts.append(bound.replace("item(s)", "character(s)") if text_field else bound)
        pattern = getattr(meta, "pattern", None)
        if pattern:
            parts.append(f"matches `{pattern}`")
    return "; ".join(parts)


def _comments(cls: type) -> dict[str, str]:
    """A field's comment from the source: the one on its line, else the lines right above it. A
    short comment (a few words, no full stop) labels a group of fields, as ``# vllm`` does in
    EngineSpec: it prefixes every field after it, up to the next label."""
    try:
        lines = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    found: dict[str, str] = {}
    above: list[str] = []
    group = ""
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("#").strip())
            continue
        match = re.match(r"^\s{4}(\w+)\s*:[^#]*(?:#\s*(.*))?$", line)
        if match and match.group(1) not in found:
            text = " ".join(above)
            if above and len(text.split()) <= 4 and "." not in text:
                group, text = text, ""
            own = match.group(2) or text
            found[match.group(1)] = f"{group}: {own}" if group and own else (own or group)
        above = []
    return found


def _default(value: Any) -> str:
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_defaults=True)
    elif isinstance(value, list | tuple) and value and isinstance(value[0], BaseModel):
        value = [v.model_dump(mode="json", exclude_defaults=True, exclude={"family"}) for v in value]
    elif isinstance(value, enum.Enum):
        value = value.value
    elif isinstance(value, Path):
        value = str(value)
    elif isinstance(value, tuple | frozenset | set):
        value = list(value)
    text = json.dumps(value, ensure_ascii=False, default=str)
    return f"`{text}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _description(cls: type[BaseModel], name: str, field: FieldInfo) -> str:
    return field.description or _comments(cls).get(name, "")


def _rows(cls: type[BaseModel], instance: BaseModel | None, prefix: str, seen: dict[type, str]) -> list[str]:
    """The table rows of ``cls``'s fields under ``prefix``; ``instance`` holds this occurrence's
    defaults (None inside a list or an unset optional section: the class defaults apply)."""
    rows: list[str] = []
    for name, field in cls.model_fields.items():
        key = f"{prefix}{name}"
        inner, _ = _optional(field.annotation)
        value = (
            getattr(instance, name) if instance is not None else field.get_default(call_default_factory=True)
        )
        description = _description(cls, name, field)
        item = _args(inner)[0] if typing.get_origin(inner) in (list, tuple) and _args(inner) else None
        if _is_model(inner):
            if isinstance(value, BaseModel):
                seen.setdefault(inner, key)
                rows += _rows(inner, value, f"{key}.", seen)
                continue
            if inner in seen:  # an unset optional section of a kind documented above
                note = f"the keys of `{seen[inner]}`; unset: " + _default(value).strip("`")
                rows.append(_row(key, field, "section or null", "", f"{description} ({note})"))
                continue
            seen[inner] = key
            rows.append(_row(key, field, _type_name(field.annotation), _default(value), description))
            rows += _rows(inner, None, f"{key}.", seen)
            continue
        rows.append(_row(key, field, _type_name(field.annotation), _default(value), description))
        if _is_model(item):
            rows += _rows(item, None, f"{key}[].", seen)
    return rows


def _row(key: str, field: FieldInfo, type_name: str, default: str, description: str) -> str:
    cells = [f"`{key}`", type_name, default, _allowed(field), description]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _doc_first_paragraph(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    if cls.__doc__ is None or doc == inspect.getdoc(BaseModel) or doc.startswith("A strict, immutable"):
        return ""
    text = " ".join(doc.split("\n\n")[0].split())
    return re.sub(r"(?::\w+:)?``?([^`]+)``?", r"`\1`", text)


def render() -> str:
    """The whole of docs/configuration.md, from ``FactoryConfig``'s fields and defaults."""
    config = FactoryConfig()
    comments = _comments(FactoryConfig)
    out = [_HEADER]
    seen: dict[type, str] = {}
    for name, field in FactoryConfig.model_fields.items():
        value = getattr(config, name)
        inner = field.annotation
        out.append(f"## `{name}`\n")
        about = [
            _doc_first_paragraph(inner) if _is_model(inner) else "",
            field.description or ("" if field.exclude else comments.get(name, "")),
            "*Not in the config hash.*" if field.exclude else "",
        ]
        text = " ".join(a for a in about if a)
        if text:
            out.append(text + "\n")
        out.append("| key | type | default | allowed | description |\n|---|---|---|---|---|")
        if _is_model(inner):
            seen.setdefault(inner, name)
            out += _rows(inner, value, f"{name}.", seen)
        else:
            out.append(
                _row(
                    name, field, _type_name(inner), _default(value), _description(FactoryConfig, name, field)
                )
            )
            item = _args(inner)[0] if typing.get_origin(inner) is list else None
            if _is_model(item):
                out += _rows(item, None, f"{name}[].", seen)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is stale")
    parser.add_argument("--out", type=Path, default=DOC_PATH, help="where to write (default: docs/)")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is out of date: run `{REGENERATE}` to regenerate it", file=sys.stderr)
            return 1
        return 0
    tmp = args.out.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
