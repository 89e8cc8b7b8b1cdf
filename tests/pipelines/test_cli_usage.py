"""Usage errors of `ptf` as a user meets them: the usage line, a one-line reason, exit 2, no traceback."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

Ptf = Callable[..., subprocess.CompletedProcess[str]]

USAGE_ERRORS = {
    # unknown command, at the top and inside each group
    "unknown-command": (["nosuchcmd"], "No such command 'nosuchcmd'"),
    "unknown-datasets-command": (["datasets", "nosuch"], "No such command 'nosuch'"),
    "unknown-annotate-command": (["annotate", "nosuch"], "No such command 'nosuch'"),
    # unknown option
    "unknown-option-run": (["run", "--seeds", "x", "--dry-runn"], "No such option: --dry-runn"),
    "unknown-option-pull": (["pull", "sft@v1", "--to", "d", "--nope"], "No such option: --nope"),
    "unknown-option-datasets-list": (["datasets", "list", "--bogus"], "No such option: --bogus"),
    # missing argument or option
    "missing-argument-pull": (["pull"], "Missing argument"),
    "missing-argument-lineage": (["lineage"], "Missing argument"),
    "missing-argument-datasets-show": (["datasets", "show"], "Missing argument"),
    "missing-option-run": (["run"], "Missing option '--seeds'"),
    # bad argument or option value
    "bad-argument-train": (["train", "xyz", "--output", "d"], "'xyz' is not a kind of training"),
    "bad-option-dedup": (
        ["dedup", "in.parquet", "--text-column", "t", "--threshold", "5", "--out", "o.parquet"],
        "--threshold",
    ),
    "bad-option-type-train": (["train", "sft", "--max-steps", "many"], "Invalid value for '--max-steps'"),
    "bad-file-sandbox-run": (["sandbox", "run", "no-such-file.py"], "is not a file"),
}


@pytest.mark.parametrize("case", sorted(USAGE_ERRORS))
def test_usage_errors_print_usage_and_reason_and_exit_2(ptf: Ptf, case: str) -> None:
    argv, reason = USAGE_ERRORS[case]
    result = ptf(*argv, timeout=120)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("Usage: ptf"), result.stderr
    errors = [line for line in lines if line.startswith("Error:")]
    assert len(errors) == 1 and reason in errors[0], result.stderr
