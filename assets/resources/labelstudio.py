"""``LabelStudioResource``: the Label Studio server, its clients, the label ledger, and the one
pusher, each batch's tasks where that batch's config says."""

import os
from collections.abc import Callable, Iterable

import dagster as dg

from ptfactory.annotators.labelstudio.client import LabelStudioClient
from ptfactory.annotators.labelstudio.ledger import Ledger
from ptfactory.annotators.labelstudio.server import LabelStudioServer
from ptfactory.annotators.labelstudio.settings import AnnotationConfig
from ptfactory.annotators.labelstudio.sync import Destination, PullResult, PushResult, pull, push_queue
from ptfactory.assets.resources.settings import SettingsResource

__all__ = ["LabelStudioResource"]


class LabelStudioResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Label Studio as the run's config (or each batch's) names it; nothing here runs an engine."""

    settings: SettingsResource

    def server(self, annotation: AnnotationConfig | None = None) -> LabelStudioServer:
        """The Label Studio `ptf annotate up` runs on this machine."""
        annotation = annotation or self.settings.config.annotation
        return LabelStudioServer(self.settings.state_dir, port=annotation.port)

    def client(self, annotation: AnnotationConfig | None = None) -> LabelStudioClient:
        """A client for ``annotation``'s Label Studio (ours unless ``annotation.url`` names another)."""
        annotation = annotation or self.settings.config.annotation
        server = self.server(annotation)
        token = os.environ.get(annotation.token_env) or server.credentials().token
        return LabelStudioClient(annotation.url or server.url, token)

    def ledger(self) -> Ledger:
        return Ledger(self.settings.state_dir / "annotation" / "ledger.sqlite")

    def push_queue(
        self, slots: Iterable[str] | None = None, progress: Callable[[int], None] | None = None
    ) -> PushResult:
        """The one pusher: every review-queue row with a slot (of ``slots``' budgets, default all)
        that is not in Label Studio yet, where its own batch's config sends it."""
        clients: dict[tuple[str | None, int, str], LabelStudioClient] = {}

        def destination(batch: str) -> Destination:
            config = self.settings.for_batch(batch).config
            annotation = config.annotation
            key = (annotation.url, annotation.port, annotation.token_env)
            if key not in clients:
                clients[key] = self.client(annotation)
            return Destination(clients[key], annotation, config.routing.accept_at)

        try:
            return push_queue(
                self.settings.review_queue(), self.ledger(), destination, slots=slots, progress=progress
            )
        finally:
            for client in clients.values():
                client.close()

    def pull(self, progress: Callable[[int], None] | None = None) -> PullResult:
        """New and changed annotations from every project a batch's config pushes to (and the run's)."""
        targets: dict[tuple[str | None, int, str, str], AnnotationConfig] = {}
        batches = self.settings.review_queue().admitted()
        for config in [self.settings.config, *(self.settings.for_batch(b).config for b in batches)]:
            a = config.annotation
            targets.setdefault((a.url, a.port, a.token_env, a.project_prefix), a)
        result = PullResult()
        ledger = self.ledger()
        for annotation in targets.values():
            client = self.client(annotation)
            try:
                pull(client, ledger, annotation, progress=progress, result=result)
            finally:
                client.close()
        return result
