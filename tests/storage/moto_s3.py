"""A real S3 API server for the tests: moto's, on 127.0.0.1, answering one request at a time.

moto checks ``If-None-Match: *`` and then stores the object as two steps, so two conditional puts
in flight at once on its threaded server could both pass the check. S3 makes the conditional put
atomic; serialising requests gives moto that guarantee too, so the race tests test ptfactory and
not moto's threading. Run as ``python -m tests.storage.moto_s3``; prints ``PORT <n>`` when ready.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server


class Serialised:
    """WSGI middleware: one request inside the app at a time (the whole response is built under the lock)."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self.lock:
            return list(self.app(environ, start_response))


def main() -> None:
    app = DomainDispatcherApplication(create_backend_app)
    server = make_server("127.0.0.1", 0, Serialised(app), threaded=True, request_handler=MotoRequestHandler)
    sys.stdout.write(f"PORT {server.server_port}\n")
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
