"""What leaves the machine for an OpenAI-compatible server: personal data and secrets are replaced by
typed placeholders before the request is sent and before its cache key is made (values planted with
Faker; a loopback stub records exactly what the server received)."""

from __future__ import annotations

import json
import string
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

from faker import Faker

from ptfactory.engines.base import SamplingParams
from ptfactory.engines.cache import ResponseCache, request_key
from ptfactory.engines.openai_engine import OpenAIEngine
from tests.pipelines.planted import find_planted

FAKE = Faker("en_US")
FAKE.seed_instance(3839)


class _Recorder(BaseHTTPRequestHandler):
    """Answers every chat request with "ok" and keeps the bodies it was sent."""

    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        type(self).bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        body = json.dumps(
            {
                "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return


def test_requests_to_a_remote_server_carry_placeholders_not_values(tmp_path: Path) -> None:
    email, ip = FAKE.email(), FAKE.ipv4_public()
    key = "AKIA" + FAKE.bothify("?" * 16, letters=string.ascii_uppercase + "234567")
    conversation = [
        {"role": "system", "content": "You answer support mail."},
        {"role": "user", "content": f"Mail {email}: the login from {ip} used key {key}."},
    ]
    httpd = HTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    cache = ResponseCache(tmp_path / "responses.sqlite")
    try:
        engine = OpenAIEngine(
            model_id="m", base_url=f"http://127.0.0.1:{httpd.server_port}/v1", cache=cache, backoff_s=0.01
        )
        params = SamplingParams()
        assert engine.chat([conversation], params)[0][0].text == "ok"
        sent = json.dumps(_Recorder.bodies)
        assert email not in sent and ip not in sent and key not in sent
        user = _Recorder.bodies[0]["messages"][1]
        assert user["content"] == "Mail <EMAIL_ADDRESS>: the login from <IP_ADDRESS> used key <API_KEY>."
        assert _Recorder.bodies[0]["messages"][0]["role"] == "system"
        # the cache is keyed by what was sent: the same question again is a hit, nothing is sent
        redacted = [conversation[0], user]
        assert cache.get_many([request_key("chat", engine.cache_identity(), params.to_dict(), redacted)])
        engine.chat([conversation], params)
        assert len(_Recorder.bodies) == 1 and engine.stats.cache_hits == 1
        assert find_planted(tmp_path, [email, ip, key]) == {}

        # privacy.enabled: false (the resource sets redact to None): sent as given
        plain = OpenAIEngine(model_id="m2", base_url=f"http://127.0.0.1:{httpd.server_port}/v1", redact=None)
        plain.chat([conversation], params)
        assert email in json.dumps(_Recorder.bodies[-1])
    finally:
        httpd.shutdown()
