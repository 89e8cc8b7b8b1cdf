"""Credentials whose name and value stand on different lines, which the line-by-line plugins cannot
see (each because a planted value went through to a stored row):

- a Terraform variable named as a secret and its default (``variable "datadog_api_key" {`` ...
  ``default = "..."``);
- a YAML key named as a secret with a block scalar (``api_token: >-`` and the value on the next line);
- a connection call given (URL, user, password) as positional strings, split over lines
  (``DriverManager.getConnection(`` then ``"jdbc:postgresql://...", "user", "..."``; a PDO DSN
  ``'mysql:host=...'``; a host, ``new mysqli('localhost', 'user', '...')``);
- a Markdown table with a secret's column (``| user | password |``): each row's field under it; a
  key/value table's value beside a secret's name (``| password | ... |``).

Every value passes :func:`~.credentials.credible` under its name, as the one-line rules' do.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ptfactory.filters.privacy.credentials import _NAME, _QUOTED, credible, holds_secret

__all__ = ["block_secrets"]

_TERRAFORM = re.compile(
    r"\bvariable\s+\"" + _NAME + r"\"\s*\{[^{}]*?\bdefault\s*=\s*\"(?P<value>[^\"\s]+)\"", re.IGNORECASE
)
_YAML_BLOCK = re.compile(
    r"^(?P<indent>[ \t]*)" + _NAME + r"[\"']?\s*:\s*[>|][-+]?\d?[ \t]*\r?\n"
    r"(?P=indent)[ \t]+(?P<value>\S+)[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_CONNECT = re.compile(
    r"\(\s*[\"'](?:jdbc:|[a-z][a-z0-9+.-]*://|[a-z]+:(?:host|dbname|unix_socket|server)=)[^\"'\n]*[\"']\s*,"
    r"\s*[\"'][^\"'\n]{1,64}[\"']\s*,\s*[\"']" + _QUOTED + r"[\"']"
)
# a connect call given (host, user, password) as strings: new mysqli('localhost', 'u', 'X'),
# mysqli_connect($h ...), pymysql.connect("db.acme.io", "u", "X")
_CONNECT_HOST = re.compile(
    r"\b(?:\w*connect\w*|mysqli)\s*\(\s*[\"'](?:localhost|[\w-]+(?:\.[\w-]+)+)(?::\d+)?[\"']\s*,\s*"
    r"[\"'][^\"'\n]{1,64}[\"']\s*,\s*[\"']" + _QUOTED + r"[\"']",
    re.IGNORECASE,
)
_CELLS = re.compile(r"^\s*\|(.*)\|\s*$")


def _secret_name(cell: str) -> str:
    name = cell.strip().replace(" ", "_")
    return name if re.fullmatch(_NAME, name, re.IGNORECASE) and holds_secret(name) else ""


def _table(text: str) -> Iterator[tuple[int, int]]:
    """A Markdown table's fields under a secret's column (``| user | password |``), and a key/value
    table's value beside a secret's name (``| password | X |``)."""
    offset, header = 0, True
    columns: dict[int, str] = {}  # a secret's column -> its name
    for line in text.splitlines(keepends=True):
        row = _CELLS.match(line)
        cells = row.group(1).split("|") if row else []
        if not row:
            header, columns = True, {}
        elif header:  # a table's first row: which columns hold a secret
            header, columns = False, {i: n for i, c in enumerate(cells) if (n := _secret_name(c))}
        elif row and not re.fullmatch(r"[\s|:-]*", row.group(1)):  # a data row (not |---|---|)
            names = dict(columns) if len(cells) > max(columns, default=-1) else {}
            if len(cells) == 2 and _secret_name(cells[0]):
                names[1] = _secret_name(cells[0])
            at = offset + row.start(1)
            for i, cell in enumerate(cells):
                # under its column's name: a `token` column of design tokens holds words, no secret
                if i in names and credible(cell, names[i]):
                    lead = len(cell) - len(cell.lstrip())
                    yield at + lead, at + lead + len(cell.strip())
                at += len(cell) + 1
        offset += len(line)


def block_secrets(text: str) -> Iterator[tuple[int, int]]:
    """Where the credible values of the forms above stand in ``text``."""
    for rule in (_TERRAFORM, _YAML_BLOCK):
        for m in rule.finditer(text):
            if credible(m.group("value"), m.group("name")):
                yield m.span("value")
    for m in (*_CONNECT.finditer(text), *_CONNECT_HOST.finditer(text)):
        if credible(m.group("value"), "password"):
            yield m.span("value")
    yield from _table(text)
