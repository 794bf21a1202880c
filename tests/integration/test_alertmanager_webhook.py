"""The real Alertmanager pages our webhook parser: what it sends is a version 4 payload
that `remediation.service.alerts.parse_webhook` reads, firing and then resolved."""

from __future__ import annotations

import base64
import http.server
import queue
import threading

import pytest

from remediation.service.alerts import parse_webhook
from sandbox import alertmanager

pytestmark = pytest.mark.integration


class _Inbox(http.server.BaseHTTPRequestHandler):
    bodies: queue.Queue[bytes] = queue.Queue()
    authorizations: queue.Queue[str | None] = queue.Queue()

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers["Content-Length"])
        self.authorizations.put(self.headers.get("Authorization"))
        self.bodies.put(self.rfile.read(length))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_real_alertmanager_sends_version_4_payloads_we_parse(tmp_path):
    inbox = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Inbox)
    threading.Thread(target=inbox.serve_forever, daemon=True).start()
    am = alertmanager.start(tmp_path / "am", f"http://127.0.0.1:{inbox.server_port}/hook")
    try:
        labels = {"alertname": "KafkaLogDirOffline", "broker": "2",
                  "log_dir": "/data/b2/d1", "severity": "page"}
        am.fire(labels, {"summary": "log dir /data/b2/d1 on broker 2 is offline"})
        webhook = parse_webhook(_Inbox.bodies.get(timeout=30))
        assert webhook.version == "4"
        assert webhook.status == "firing"
        (alert,) = webhook.alerts
        assert alert.name == "KafkaLogDirOffline"
        assert dict(alert.labels) == labels
        assert alert.annotations["summary"].startswith("log dir /data/b2/d1")
        assert len(alert.fingerprint) == 16
        assert webhook.group_key  # what the receiver deduplicates on

        am.resolve(labels)
        resolved = parse_webhook(_Inbox.bodies.get(timeout=30))
        assert resolved.status == "resolved"
        assert resolved.group_key == webhook.group_key
        assert resolved.alerts[0].fingerprint == alert.fingerprint
    finally:
        assert am.stop()
        inbox.shutdown()


def test_the_token_in_the_webhook_url_reaches_serve_as_basic_auth_not_in_the_config(tmp_path):
    # The shipped example keeps the token in a password file; the sandbox renders its
    # config from it, so what Alertmanager sends is what a deployment's would.
    class Inbox(_Inbox):  # its own queues: the other test's requests are not in them
        bodies: queue.Queue[bytes] = queue.Queue()
        authorizations: queue.Queue[str | None] = queue.Queue()

    inbox = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Inbox)
    threading.Thread(target=inbox.serve_forever, daemon=True).start()
    am = alertmanager.start(
        tmp_path / "am", f"http://selfheal:tok3n@127.0.0.1:{inbox.server_port}/alertmanager")
    try:
        assert "tok3n" not in (tmp_path / "am" / "alertmanager.yml").read_text()
        am.fire({"alertname": "KafkaLogDirOffline", "broker": "1", "log_dir": "/d"})
        parse_webhook(Inbox.bodies.get(timeout=30))
        expected = base64.b64encode(b"selfheal:tok3n").decode()
        assert Inbox.authorizations.get(timeout=1) == f"Basic {expected}"
    finally:
        assert am.stop()
        inbox.shutdown()
