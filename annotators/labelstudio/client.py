"""The few Label Studio calls the factory makes, over ``label-studio-sdk`` 2.x.

Every failure to reach the server, or an answer we cannot use, becomes an
:class:`AnnotationError` that names the URL and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx

from ptfactory.annotators.labelstudio.configs import LABEL_CONFIGS, project_title
from ptfactory.errors import AnnotationError

__all__ = ["LabelStudioClient", "ls_time"]

T = TypeVar("T")
_DM_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # what Label Studio's data-manager filters parse


def ls_time(value: str) -> str:
    """Any ISO time Label Studio returns, in the one format its filters accept (UTC)."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed.strftime(_DM_FORMAT)


class LabelStudioClient:
    def __init__(self, url: str, token: str, timeout: float = 60.0) -> None:
        from label_studio_sdk import LabelStudio

        self.url = url.rstrip("/")
        self.sdk = LabelStudio(base_url=self.url, api_key=token, timeout=timeout)  # type: ignore[no-untyped-call]
        self._http = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Token {token}"}, timeout=timeout
        )

    def close(self) -> None:
        self._http.close()

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        from label_studio_sdk.core.api_error import ApiError

        try:
            return fn()
        except (
            httpx.ConnectError,
            httpx.ReadError,
            httpx.RemoteProtocolError,
            httpx.TimeoutException,
        ) as exc:
            raise AnnotationError(
                f"Label Studio at {self.url} did not answer ({what}: {type(exc).__name__}); "
                "start it with `ptf annotate up`"
            ) from exc
        except ApiError as exc:
            if exc.status_code in (401, 403):
                raise AnnotationError(
                    f"Label Studio at {self.url} refused our token ({what}); check PTF_LS_TOKEN "
                    "or .ptf/annotation/credentials.json"
                ) from exc
            raise AnnotationError(
                f"Label Studio at {self.url} answered {exc.status_code} to {what}: {str(exc.body)[:300]}"
            ) from exc

    def _get(self, what: str, path: str, **params: Any) -> Any:
        def fetch() -> Any:
            response = self._http.get(path, params=params)
            if response.status_code >= 400:
                from label_studio_sdk.core.api_error import ApiError

                raise ApiError(status_code=response.status_code, body=response.text, headers=None)
            return response.json()

        return self._call(what, fetch)

    # projects ------------------------------------------------------------------------------
    def find_project(self, prefix: str, queue: str) -> int | None:
        title = project_title(prefix, queue)
        projects: list[Any] = self._call(
            "listing projects", lambda: list(self.sdk.projects.list(title=title))
        )
        exact = [p for p in projects if p.title == title]  # the API's title filter is a substring match
        return min(int(p.id) for p in exact if p.id is not None) if exact else None

    def project(self, prefix: str, queue: str) -> int:
        """The queue's project, found by exact title or created with its labeling config."""
        found = self.find_project(prefix, queue)
        if found is not None:
            return found
        created = self._call(
            "creating a project",
            lambda: self.sdk.projects.create(
                title=project_title(prefix, queue),
                label_config=LABEL_CONFIGS[queue],
                description=f"ptfactory review queue for {queue} samples (pushed by `ptf annotate push`)",
                show_collab_predictions=True,
            ),
        )
        return int(created.id)  # type: ignore[arg-type]

    def task_count(self, project_id: int) -> int:
        project = self._call("reading a project", lambda: self.sdk.projects.get(id=project_id))
        return int(project.task_number or 0)

    # tasks ---------------------------------------------------------------------------------
    def import_tasks(self, project_id: int, tasks: list[dict[str, Any]]) -> list[int]:
        response = self._call(
            "importing tasks",
            lambda: self.sdk.projects.import_tasks(id=project_id, request=tasks, return_task_ids=True),  # type: ignore[arg-type]
        )
        ids = list(getattr(response, "task_ids", None) or [])
        if len(ids) != len(tasks):
            raise AnnotationError(
                f"Label Studio at {self.url} took {len(tasks)} tasks but returned {len(ids)} task ids"
            )
        return [int(i) for i in ids]

    def _pages(
        self, what: str, project_id: int, query: dict[str, Any], fields: str, page_size: int
    ) -> Iterator[list[dict[str, Any]]]:
        page = 1
        while True:
            try:
                body = self._get(
                    what,
                    "/api/tasks",
                    project=project_id,
                    fields=fields,
                    page=page,
                    page_size=page_size,
                    query=json.dumps(query),
                )
            except AnnotationError as exc:
                if "404" in str(exc) and page > 1:  # past the last page
                    return
                raise
            tasks = body.get("tasks", []) if isinstance(body, dict) else body
            if not tasks:
                return
            yield tasks
            if len(tasks) < page_size:
                return
            page += 1

    def sample_ids(self, project_id: int, page_size: int = 500) -> dict[str, int]:
        """sample_id → task id of every task in the project (slow on sqlite: for reconciling only)."""
        out: dict[str, int] = {}
        for tasks in self._pages("listing tasks", project_id, {}, "task_only", page_size):
            for task in tasks:
                sid = (task.get("data") or {}).get("sample_id")
                if sid:
                    out.setdefault(str(sid), int(task["id"]))
        return out

    def tasks_updated_since(
        self, project_id: int, since: str | None, page_size: int = 100
    ) -> Iterator[list[dict[str, Any]]]:
        """Tasks touched at or after ``since`` (an annotation saved, updated or deleted touches its
        task), oldest first, with their annotations."""
        items = []
        if since:
            items.append(
                {
                    "filter": "filter:tasks:updated_at",
                    "operator": "greater_or_equal",
                    "type": "Datetime",
                    "value": since,
                }
            )
        query = {"filters": {"conjunction": "and", "items": items}, "ordering": ["tasks:updated_at"]}
        yield from self._pages("reading annotations", project_id, query, "all", page_size)

    def users(self) -> dict[int, str]:
        body = self._get("listing users", "/api/users/")
        return {int(u["id"]): str(u.get("email") or u.get("username")) for u in body}
