"""Execution validation: code samples are kept only if their solution passes its tests, run where
hostile or broken code can do no harm (Docker, or a bubblewrap fallback that says so loudly)."""

from ptfactory.filters.execution.base import Job, Sandbox
from ptfactory.filters.execution.limits import STATUSES, ExecResult, Limits
from ptfactory.filters.execution.select import backend_status, open_sandbox
from ptfactory.filters.execution.validate import ValidationStats, validate_parquet, validate_samples

__all__ = [
    "STATUSES",
    "ExecResult",
    "Job",
    "Limits",
    "Sandbox",
    "ValidationStats",
    "backend_status",
    "open_sandbox",
    "validate_parquet",
    "validate_samples",
]
