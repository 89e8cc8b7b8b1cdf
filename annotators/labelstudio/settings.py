"""The ``annotation`` section of factory.yaml: where review tasks go and how they come back. It is
what the Label Studio bridge takes (``sync.pull``, ``sync.Destination``), not a copy of it."""

from __future__ import annotations

from pydantic import Field

from ptfactory.section import Section

__all__ = ["AnnotationConfig"]


class AnnotationConfig(Section):
    url: str | None = Field(
        None,
        description="an existing Label Studio (its token in token_env); default: the one `ptf annotate up` runs",
    )
    port: int = Field(8080, ge=1, le=65535, description="port of the Label Studio `ptf annotate up` runs")
    token_env: str = Field("PTF_LS_TOKEN", description="env var holding the API token")
    project_prefix: str = Field("ptf review", min_length=1, description="project title: '<prefix>: <queue>'")
    push_batch: int = Field(200, gt=0, description="tasks per import request")
    pull_page: int = Field(100, gt=0, le=1000, description="tasks per page when pulling annotations")
    curation_interval_s: int = Field(
        30,
        ge=5,
        le=86_400,
        description="the label sensor's interval: it pulls and starts at most one curation run per interval",
    )
