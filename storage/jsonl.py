"""Reading JSON Lines written by people: one object a line, errors that name the file and line.

Seed files, imported datasets and id lists all come from users' editors and scripts, so they
share one reader: a leading UTF-8 BOM is dropped, blank lines are skipped, and a bad line is an
error naming ``<label>:<line>`` and what is wrong with it (the byte that is not UTF-8, the column
where the JSON breaks, what came instead of an object). Nothing is returned for a bad file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ptfactory.errors import UserInputError

__all__ = ["json_objects", "type_name"]


def type_name(value: Any) -> str:
    """A JSON value's kind in JSON's words (an error message says "got array", not "got list")."""
    if value is None:
        return "null"
    return {bool: "boolean", int: "number", float: "number", str: "text", list: "array", dict: "object"}.get(
        type(value), type(value).__name__
    )


def json_objects(
    data: bytes, label: str, error: type[UserInputError] = UserInputError
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each non-blank line of ``data`` as ``("<label>:<line>", object)``; ``error`` for a bad line."""
    for number, line_bytes in enumerate(data.split(b"\n"), start=1):
        where = f"{label}:{number}"
        raw = line_bytes[3:] if number == 1 and line_bytes.startswith(b"\xef\xbb\xbf") else line_bytes
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise error(
                f"{where}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                "save the file as UTF-8"
            ) from None
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(row, dict):
            raise error(f"{where}: expected a JSON object per line, got {type_name(row)}")
        yield where, row
