"""A real local Alertmanager (Debian's prometheus-alertmanager) that pages kafka-selfheal.

It routes every alert to one webhook receiver (`selfheal serve`'s /alertmanager
endpoint), groups by alertname, broker and log_dir, and sends at once (group_wait 0 s)
so a test or the demo sees the page within a second. Started detached, stopped by PID.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sandbox import processes

BINARY = "prometheus-alertmanager"

CONFIG = """\
route:
  receiver: selfheal
  group_by: [alertname, broker, log_dir]
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: selfheal
    webhook_configs:
      - url: {url}
        send_resolved: true
"""


class AlertmanagerError(RuntimeError):
    """Alertmanager could not be started or reached; the message says what to do."""


@dataclasses.dataclass(frozen=True)
class Alertmanager:
    pid: int
    port: int
    work_dir: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def marker(self) -> str:
        return str(self.work_dir / "alertmanager.yml")

    def fire(self, labels: dict[str, str], annotations: dict[str, str] | None = None,
             minutes: float = 30.0) -> None:
        """Post one firing alert to Alertmanager's v2 API (what Prometheus would send)."""
        now = datetime.now(UTC)
        self._post(labels, annotations, now, now + timedelta(minutes=minutes))

    def resolve(self, labels: dict[str, str]) -> None:
        """Post the same alert as ended a moment ago: Alertmanager sends it resolved."""
        now = datetime.now(UTC)
        self._post(labels, None, now - timedelta(minutes=5), now - timedelta(seconds=1))

    def _post(self, labels: dict[str, str], annotations: dict[str, str] | None,
              starts: datetime, ends: datetime) -> None:
        body = [{"labels": labels, "annotations": annotations or {},
                 "startsAt": starts.isoformat(), "endsAt": ends.isoformat()}]
        request = urllib.request.Request(
            f"{self.url}/api/v2/alerts", data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=5):
                pass
        except urllib.error.HTTPError as exc:
            raise AlertmanagerError(
                f"Alertmanager refused the alert: HTTP {exc.code} {exc.read().decode()}") from exc

    def stop(self) -> bool:
        return processes.stop(self.pid, self.marker)


def start(work_dir: Path, webhook_url: str, timeout: float = 30.0) -> Alertmanager:
    """Start Alertmanager in ``work_dir`` on a free 127.0.0.1 port, paging ``webhook_url``."""
    binary = shutil.which(BINARY)
    if binary is None:
        raise AlertmanagerError(
            f"{BINARY} is not installed; `make test` installs it (apt-get install {BINARY})")
    work_dir.mkdir(parents=True, exist_ok=True)
    config = work_dir / "alertmanager.yml"
    config.write_text(CONFIG.format(url=json.dumps(webhook_url)))
    port = processes.free_port()
    pid = processes.spawn([
        binary, f"--config.file={config}", f"--storage.path={work_dir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
        "--log.level=warn",
    ], work_dir / "alertmanager.log", work_dir)
    am = Alertmanager(pid, port, work_dir)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{am.url}/-/ready", timeout=2) as resp:
                if resp.status == 200:
                    return am
        except OSError:
            pass
        if not processes.is_running(pid, am.marker) or time.monotonic() > deadline:
            am.stop()
            log = (work_dir / "alertmanager.log").read_text(errors="replace")[-2000:]
            raise AlertmanagerError(f"Alertmanager did not become ready:\n{log}")
        time.sleep(0.2)
