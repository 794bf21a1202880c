"""A real local Alertmanager (Debian's prometheus-alertmanager) that pages kafka-selfheal.

Its configuration is the shipped example (dashboards/alertmanager.example.yml: every
alert to `selfheal serve`'s /alertmanager webhook, grouped by alertname, broker and
log_dir) with the webhook's address and token of the running loop, sending at once
(group_wait 0 s) so a test or the demo sees the page within a second. Started detached,
stopped by PID.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from sandbox import processes

BINARY = "prometheus-alertmanager"

EXAMPLE = Path(__file__).resolve().parents[1] / "dashboards" / "alertmanager.example.yml"
# The sandbox's timings: a page at once, not after the example's production waits.
TIMINGS = {"group_wait": "0s", "group_interval": "1s", "repeat_interval": "1h"}


def render(webhook_url: str, token_file: Path) -> dict[str, Any]:
    """The example's configuration pointed at ``webhook_url``. Credentials in the URL
    (http://selfheal:<token>@host/...) go where the example keeps them: the basic-auth
    password, read from ``token_file`` (written here, mode 0600)."""
    doc = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    doc["route"].update(TIMINGS)
    (receiver,) = doc["receivers"]
    (webhook,) = receiver["webhook_configs"]
    parts = urllib.parse.urlsplit(webhook_url)
    netloc = parts.hostname or ""
    if parts.port is not None:
        netloc += f":{parts.port}"
    webhook["url"] = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    if parts.password is None:
        del webhook["http_config"]
    else:
        token_file.write_text(urllib.parse.unquote(parts.password), encoding="utf-8")
        token_file.chmod(0o600)
        auth = webhook["http_config"]["basic_auth"]
        auth["username"] = urllib.parse.unquote(parts.username or "")
        auth["password_file"] = str(token_file)
    return doc


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
    doc = render(webhook_url, work_dir / "selfheal-api-token")
    config.write_text(json.dumps(doc, indent=2) + "\n")  # JSON is YAML
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
