"""Resolve the lowest versions pyproject.toml admits, together (`make lint` runs it in CI).

constraints.txt is the exact set CI installs and tests; pyproject.toml gives each runtime
dependency a range. This asks pip whether the range's lower ends still make one installable set on
this Python: every runtime dependency pinned at its lower bound, resolved with their own
dependencies (`pip install --dry-run`: metadata only, nothing installed). A lower bound that no
longer installs, or two that conflict, fail here with pip's reason, before a user meets them.

    .venv/bin/python scripts/check-lower-bounds.py [--show]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def lower_pins(pyproject: Path) -> list[str]:
    """``name==lower`` for every runtime dependency; one without a lower bound is an error (a range
    must say where it starts)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    pins = []
    for line in project["dependencies"]:
        requirement = Requirement(line)
        lows = [s.version for s in requirement.specifier if s.operator in (">=", "==", "~=")]
        if not lows:
            raise SystemExit(f"{pyproject}: dependency {line!r} has no lower bound; give it >=VERSION")
        pins.append(f"{requirement.name}=={max(lows, key=_key)}")
    return pins


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true", help="print the lower pins and exit")
    args = parser.parse_args()
    pins = lower_pins(ROOT / "pyproject.toml")
    if args.show:
        print("\n".join(pins))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        requirements = Path(tmp) / "lower.txt"
        requirements.write_text("\n".join(pins) + "\n")
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--disable-pip-version-check",
            "--quiet",
            "-r",
            str(requirements),
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    noise = "is ignored: it is neither"  # a machine-wide local index that is absent here
    errors = "\n".join(line for line in result.stderr.splitlines() if noise not in line)
    if result.returncode:
        print(f"the lower bounds of pyproject.toml do not resolve together:\n{errors}", file=sys.stderr)
        return 1
    print(f"lower bounds resolve: {len(pins)} runtime dependencies at their lowest admitted versions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
