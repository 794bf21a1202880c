"""A real local Prometheus (Debian's `prometheus`) watching the sandbox.

It scrapes every broker's JMX exporter (and the KRaft controller's), each target labelled
with ``cluster``, ``broker`` and ``rack`` as a production setup would relabel them, plus
whatever selfheal processes it is given (file-based discovery, so targets change without a
restart); it loads the project's alert and recording rules (`dashboards/rules/*.yml`) and
sends alerts to an Alertmanager when it is given one.

It runs on demand (`selfheal sandbox prometheus start`), not with `sandbox up`: most tests
never look at it, and a Prometheus per session would cost every `make test` its start-up
and memory. Bound to 127.0.0.1 on a free port, its config and data in
``<sandbox>/prometheus/``, its PID in ``prometheus.json`` there; stopped by PID, trusted
only while /proc/PID/cmdline carries its config path. A Prometheus the Debian package may
have started as a system service is not ours and is never touched.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sandbox import processes
from sandbox.state import SandboxState

BINARY = "prometheus"
RULES_DIR = Path(__file__).resolve().parents[1] / "dashboards" / "rules"
EXAMPLE = Path(__file__).resolve().parents[1] / "dashboards" / "prometheus.example.yml"
# Quick enough that a failed dir shows within seconds in the tests and the demo.
SCRAPE_INTERVAL = "2s"
EVALUATION_INTERVAL = "2s"


class PrometheusError(RuntimeError):
    """Prometheus could not be started, reached, or refused a query; says what to do."""


def folder(work_dir: str | Path) -> Path:
    """Where the sandbox in ``work_dir`` keeps its Prometheus."""
    return Path(work_dir) / "prometheus"


@dataclasses.dataclass(frozen=True)
class Prometheus:
    pid: int
    port: int
    work_dir: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.work_dir / "prometheus.yml"

    @property
    def marker(self) -> str:
        return str(self.config_path)

    @property
    def targets_path(self) -> Path:
        return self.work_dir / "selfheal-targets.json"

    def running(self) -> bool:
        return processes.is_running(self.pid, self.marker)

    def stop(self) -> bool:
        """Stop it by PID; True if it was running. Its data stays until `sandbox down`."""
        stopped = processes.stop(self.pid, self.marker)
        (self.work_dir / "prometheus.json").unlink(missing_ok=True)
        return stopped

    def set_targets(self, targets: Mapping[str, str]) -> None:
        """The selfheal processes to scrape: ``{name: "127.0.0.1:port"}`` (their /metrics).
        Prometheus re-reads the file by itself."""
        write_targets(self.targets_path, targets)

    def set_alertmanager(self, url: str | None) -> None:
        """Send alerts to ``url`` (None: to nobody); reloads the config with SIGHUP."""
        text = self.config_path.read_text()
        config = json.loads(text)
        config["alerting"] = _alerting(url)
        self.config_path.write_text(json.dumps(config, indent=2) + "\n")
        if self.running():
            os.kill(self.pid, signal.SIGHUP)

    # --- the HTTP API -----------------------------------------------------------------

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>; the ``data`` of a success, PrometheusError otherwise."""
        query = urllib.parse.urlencode(params)
        url = f"{self.url}/api/v1/{path}" + (f"?{query}" if query else "")
        try:
            with urllib.request.urlopen(url, timeout=30) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as exc:
            try:
                body = json.loads(exc.read())
            except ValueError:
                raise PrometheusError(f"Prometheus answered HTTP {exc.code} to {url}") from None
        if body.get("status") != "success":
            raise PrometheusError(f"{body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector (a scalar comes back as one sample)."""
        data = self.api("query", query=expr)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts Prometheus holds right now (pending and firing)."""
        return list(self.api("alerts")["alerts"])

    def rule_groups(self) -> list[dict[str, Any]]:
        return list(self.api("rules")["groups"])

    def targets(self) -> list[dict[str, Any]]:
        return list(self.api("targets", state="active")["activeTargets"])


def _alerting(url: str | None) -> dict[str, Any]:
    if not url:
        return {"alertmanagers": []}
    parts = urllib.parse.urlsplit(url)
    return {"alertmanagers": [{
        "scheme": parts.scheme or "http",
        "path_prefix": parts.path or "/",
        "static_configs": [{"targets": [parts.netloc]}],
    }]}


def write_targets(path: Path, targets: Mapping[str, str], labels: Mapping[str, str] | None
                  = None) -> None:
    """File-based discovery: one group per selfheal process, its ``process`` label the
    name. The cluster label comes from the file's existing groups when not given."""
    if labels is None:
        try:
            old = json.loads(path.read_text())
            labels = {"cluster": old[0]["labels"]["cluster"]} if old else {}
        except (FileNotFoundError, ValueError, KeyError, IndexError):
            labels = {}
    groups = [{"targets": [address], "labels": {**labels, "process": name}}
              for name, address in sorted(targets.items())]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(groups, indent=2) + "\n")
    tmp.replace(path)  # Prometheus must never read half a file


def _exporter_auth(state: SandboxState) -> dict:
    """HTTPS and basic auth for the secured sandbox's exporters (the password read from
    its file by Prometheus itself)."""
    if state.security is None:
        return {}
    from sandbox.secure import exporter_section

    section = exporter_section(state.security)
    return {"scheme": "https", "tls_config": {"ca_file": section["ssl_ca_file"]},
            "basic_auth": {"username": section["username"],
                           "password_file": section["password_file"]}}


def exporters(state: SandboxState) -> list[dict[str, Any]]:
    """Every JMX exporter of ``state`` labelled with cluster, broker, role and rack."""
    found = []
    for server in ([state.controller] if state.controller else []) + list(state.brokers):
        if server.exporter_port is None:
            continue
        labels = {"cluster": state.cluster_id, "broker": str(server.node_id),
                  "role": server.role}
        if server.rack:
            labels["rack"] = server.rack
        found.append({"targets": [f"127.0.0.1:{server.exporter_port}"], "labels": labels})
    return found


def config(state: SandboxState, targets_file: Path, alertmanager_url: str | None) -> dict:
    """The Prometheus configuration for ``state`` (JSON is YAML, so it is written as JSON)."""
    cluster = {"cluster": state.cluster_id}
    return {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "scrape_timeout": SCRAPE_INTERVAL,
                   "evaluation_interval": EVALUATION_INTERVAL},
        "rule_files": [str(RULES_DIR / "*.yml")],
        "alerting": _alerting(alertmanager_url),
        "scrape_configs": [
            {"job_name": "kafka", "static_configs": exporters(state), **_exporter_auth(state)},
            {"job_name": "selfheal",
             "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": "5s"}]},
            {"job_name": "prometheus",
             "static_configs": [{"targets": ["{self}"], "labels": cluster}]},
        ],
    }


def render_example(state: SandboxState, selfheal: Mapping[str, str],
                   alertmanager_url: str | None, home: Path) -> dict[str, Any]:
    """The shipped example (dashboards/prometheus.example.yml) pointed at the sandbox: its
    exporters under job `kafka`, the selfheal processes ``{process: "host:port"}`` under
    job `selfheal` with the example's labels, the rules copied beside the configuration in
    ``home`` (as the example says), and the sandbox's quick timings."""
    import yaml

    doc = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    doc["global"].update(scrape_interval=SCRAPE_INTERVAL, scrape_timeout=SCRAPE_INTERVAL,
                         evaluation_interval=EVALUATION_INTERVAL)
    shutil.copytree(RULES_DIR, home / "rules", dirs_exist_ok=True)
    doc["alerting"] = _alerting(alertmanager_url)
    jobs = {job["job_name"]: job for job in doc["scrape_configs"]}
    jobs["kafka"]["static_configs"] = exporters(state)
    jobs["kafka"].update(_exporter_auth(state))
    shipped = {group["labels"]["process"]: group["labels"]
               for group in jobs["selfheal"]["static_configs"]}
    jobs["selfheal"]["static_configs"] = [
        {"targets": [address], "labels": {**shipped[name], "cluster": state.cluster_id}}
        for name, address in sorted(selfheal.items())]
    return doc


def start_example(state: SandboxState, home: Path, selfheal: Mapping[str, str],
                  alertmanager_url: str | None, timeout: float = 60.0) -> Prometheus:
    """A Prometheus of its own in ``home`` running `render_example`'s configuration."""
    home.mkdir(parents=True, exist_ok=True)
    return _spawn(home, render_example(state, selfheal, alertmanager_url, home),
                  processes.free_port(), timeout)


def find(work_dir: str | Path) -> Prometheus | None:
    """The sandbox's Prometheus if it runs, else None."""
    home = folder(work_dir)
    try:
        info = json.loads((home / "prometheus.json").read_text())
    except (FileNotFoundError, ValueError):
        return None
    prom = Prometheus(int(info["pid"]), int(info["port"]), home)
    return prom if prom.running() else None


def start(state: SandboxState, alertmanager_url: str | None = None,
          targets: Mapping[str, str] | None = None, timeout: float = 60.0) -> Prometheus:
    """Start the sandbox's Prometheus (or return the one that runs) and wait until it is
    ready: rules loaded, first scrapes due."""
    running = find(state.work_dir)
    if running is not None:
        if alertmanager_url is not None:
            running.set_alertmanager(alertmanager_url)
        if targets is not None:
            running.set_targets(targets)
        return running
    home = folder(state.work_dir)
    home.mkdir(parents=True, exist_ok=True)
    targets_file = home / "selfheal-targets.json"
    write_targets(targets_file, targets or {}, {"cluster": state.cluster_id})
    port = processes.free_port()
    doc = config(state, targets_file, alertmanager_url)
    doc["scrape_configs"][2]["static_configs"][0]["targets"] = [f"127.0.0.1:{port}"]
    return _spawn(home, doc, port, timeout)


def _spawn(home: Path, doc: dict[str, Any], port: int, timeout: float) -> Prometheus:
    """Write ``doc`` as ``home``/prometheus.yml, start Prometheus on ``port`` and wait
    until it is ready."""
    binary = shutil.which(BINARY)
    if binary is None:
        raise PrometheusError(
            f"{BINARY} is not installed; `make deps` installs it (apt-get install {BINARY})")
    config_path = home / "prometheus.yml"
    config_path.write_text(json.dumps(doc, indent=2) + "\n")
    pid = processes.spawn([
        binary, f"--config.file={config_path}", f"--storage.tsdb.path={home / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1d",
        "--log.level=warn",
    ], home / "prometheus.log", home)
    prom = Prometheus(pid, port, home)
    (home / "prometheus.json").write_text(json.dumps({"pid": pid, "port": port}) + "\n")
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{prom.url}/-/ready", timeout=2) as resp:
                if resp.status == 200:
                    return prom
        except OSError:
            pass
        if not prom.running() or time.monotonic() > deadline:
            prom.stop()
            log = (home / "prometheus.log").read_text(errors="replace")[-2000:]
            raise PrometheusError(f"Prometheus did not become ready:\n{log}")
        time.sleep(0.2)


def stop(work_dir: str | Path) -> bool:
    """Stop the sandbox's Prometheus by PID if it runs; True if it did."""
    prom = find(work_dir)
    return prom.stop() if prom is not None else False


def loop_targets(config: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The /metrics addresses of a `sandbox.loop` configuration's pieces, for those whose
    port is fixed there (port 0 means the process picked one and only printed it)."""
    found = {}
    ports = {
        "collect-metrics": ("collect", "metrics_http_port"),
        "collect-zk": ("collect", "zk_http_port"),
        "collect-snapshots": ("collect", "snapshots_http_port"),
        "stream": ("stream", "metrics_http_port"),
        "serve": ("serve", "http_port"),
    }
    for name, (section, key) in ports.items():
        port = config.get(section, {}).get(key)
        if port:
            found[name] = f"127.0.0.1:{port}"
    return found
