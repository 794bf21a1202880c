"""The real Alertmanager pages our webhook parser: what it sends is a version 4 payload
that `remediation.service.alerts.parse_webhook` reads, firing and then resolved."""

from __future__ import annotations

import http.server
import queue
import threading

import pytest

from remediation.service.alerts import parse_webhook
from sandbox import alertmanager

pytestmark = pytest.mark.integration


class _Inbox(http.server.BaseHTTPRequestHandler):
    bodies: queue.Queue[bytes] = queue.Queue()

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers["Content-Length"])
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
