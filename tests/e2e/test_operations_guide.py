"""docs/operations.md followed literally on the sandbox (ZooKeeper mode: all five units).

The files the guide installs: `core/selfheal.example.toml` copied and edited (the cluster,
fixed /metrics ports, `policy = "policy.toml"`), `remediation/executor/policy.example.toml`
as it ships (a fix waits for approval), `secrets.env` from its example with fresh values.
Each process is its unit's ExecStart with the unit's Environment= and EnvironmentFile=,
run as a plain process (systemd is not PID 1 here), under a root folder standing in for
/: the same paths below it. Prometheus runs `dashboards/prometheus.example.yml` and
Alertmanager `dashboards/alertmanager.example.yml`, rendered for the sandbox.

A dir fails under traffic: KafkaLogDirOffline fires in Prometheus, Alertmanager hands it
to serve, serve pages (a local receiver standing in for PagerDuty) with the fix's link.
While the fix waits for approval, serve's store is backed up as the guide says (live,
`sqlite3 .backup`), serve is stopped, the store lost and restored, serve started again:
the action, its audit and its pending approval survive; it is approved and the dir's
replicas are healed.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from core.owner import safe_name
from sandbox import alertmanager, cluster, jars, jvm, loop, processes, prometheus, traffic
from sandbox.pager_receiver import ROUTING_KEY, PagerReceiver
from sandbox.state import SandboxState
from tests.e2e.heal_matrix import api
from tests.e2e.loop_support import drop_topics, wait, wait_for_batches
from tests.e2e.test_pager_loop import holder, pages
from tests.unit.test_deploy_units import INSTALLED, UNITS, parse_unit

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "operations.md"
INSTANCE = "sandbox-ops"
# systemd's environment before the unit's own (no PYTHONPATH, no HOME of ours)
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
UNIT_OF = {"collect-metrics": "selfheal-collect-metrics@.service",
           "collect-snapshots": "selfheal-collect-snapshots@.service",
           "collect-zk": "selfheal-collect-zk@.service",
           "stream": "selfheal-stream@.service", "serve": "selfheal-serve@.service"}


def edit_toml(text: str, section: str, key: str, value: Any) -> str:
    """Set ``key`` in ``[section]`` ("": the top) of the example, on its own line there
    (shown or commented out), as an operator edits the copied file."""
    lines = text.splitlines()
    start = 0 if not section else lines.index(f"[{section}]") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("[")), len(lines))
    line = f"{key} = {json.dumps(value)}"  # a JSON string, number or list is TOML too
    for i in range(start, end):
        if lines[i].lstrip("# ").split(" = ", 1)[0] == key:
            lines[i] = line
            return "\n".join(lines) + "\n"
    raise AssertionError(f"the example has no {key} in [{section}]")


def read_env_file(path: Path) -> dict[str, str]:
    """An EnvironmentFile= as systemd reads it: KEY=VALUE lines, comments skipped."""
    out = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


class Installed:
    """The guide's install under ``root`` (standing in for /), one instance."""

    def __init__(self, root: Path, state: SandboxState, pager_url: str) -> None:
        self.root = root
        self.etc = root / "etc" / "kafka-selfheal" / INSTANCE
        self.var = root / "var" / "lib" / "kafka-selfheal" / INSTANCE
        self.etc.mkdir(parents=True)
        self.ports = {name: processes.free_port() for name in UNIT_OF}
        self.prefix = f"ops{uuid.uuid4().hex[:6]}."
        text = (REPO / "core" / "selfheal.example.toml").read_text(encoding="utf-8")
        for section, key, value in (
                ("", "policy", "policy.toml"),
                ("cluster", "bootstrap_servers", state.bootstrap_servers),
                ("cluster", "zookeeper_connect", state.zookeeper_connect),
                ("cluster", "mode", "zk"),
                ("cluster", "cluster_id", state.cluster_id),
                ("cluster", "exporter_urls", [f"{b.node_id}={b.exporter_url}"
                                              for b in state.brokers if b.exporter_url]),
                ("bus", "topic_prefix", self.prefix),  # the sandbox's bus is shared
                ("collect", "metrics_http_port", self.ports["collect-metrics"]),
                ("collect", "snapshots_http_port", self.ports["collect-snapshots"]),
                ("collect", "zk_http_port", self.ports["collect-zk"]),
                ("stream", "metrics_http_port", self.ports["stream"]),
                ("serve", "http_port", self.ports["serve"]),
                ("pager", "pagerduty_url", pager_url)):
            text = edit_toml(text, section, key, value)
        (self.etc / "selfheal.toml").write_text(text, encoding="utf-8")
        shutil.copy(REPO / "remediation" / "executor" / "policy.example.toml",
                    self.etc / "policy.toml")
        self.secrets = {name: uuid.uuid4().hex + uuid.uuid4().hex for name in (
            "SELFHEAL_CLUSTER_ACTION_SIGNING_KEY", "SELFHEAL_SERVE_API_TOKEN",
            "SELFHEAL_SERVE_LINK_SECRET")}
        self.secrets["SELFHEAL_PAGER_PAGERDUTY_ROUTING_KEY"] = ROUTING_KEY
        lines = []
        for line in (UNITS / "secrets.env.example").read_text(encoding="utf-8").splitlines():
            name = line.lstrip("# ").split("=", 1)[0]
            lines.append(f"{name}={self.secrets[name]}" if name in self.secrets else line)
        env_file = self.etc / "secrets.env"
        env_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
        env_file.chmod(0o600)

    def here(self, text: str) -> str:
        """A unit's line with the instance, this checkout's selfheal, and paths under root."""
        return (text.replace("%i", INSTANCE)
                .replace(INSTALLED, str(REPO / ".venv" / "bin" / "selfheal"))
                .replace("/etc/kafka-selfheal/", f"{self.root}/etc/kafka-selfheal/")
                .replace("/var/lib/kafka-selfheal/", f"{self.root}/var/lib/kafka-selfheal/"))

    def piece(self, name: str) -> tuple[loop.Piece, dict[str, str], Path]:
        """The unit's command, environment and working directory. The one edit the guide
        asks of a unit: the stream job's SELFHEAL_SPARK_JARS line, uncommented with the
        jars of `make jars`."""
        text = (UNITS / UNIT_OF[name]).read_text(encoding="utf-8")
        listed = ",".join(str(j) for j in jars.role_jars("spark"))
        text = "\n".join(f"Environment=SELFHEAL_SPARK_JARS={listed}"
                         if line.startswith("#Environment=SELFHEAL_SPARK_JARS=") else line
                         for line in text.splitlines())
        unit = self.root / UNIT_OF[name]
        unit.write_text(self.here(text), encoding="utf-8")
        service = parse_unit(unit)["Service"]
        env = {"PATH": SYSTEMD_PATH, "LANG": "C.UTF-8",
               # `pip install` of this checkout: the shared venv's install points elsewhere
               "PYTHONPATH": str(REPO)}
        for assignment in service.get("Environment", []):
            key, _, value = assignment.partition("=")
            env[key] = value
        for path in service.get("EnvironmentFile", []):
            env.update(read_env_file(Path(path)))
        if name == "stream":  # the Spark driver's options for the 2 shared cores
            env = jvm.small_machine_env(env, share_classes=True)
        cwd = Path(service["WorkingDirectory"][0])
        cwd.mkdir(parents=True, exist_ok=True)  # StateDirectory=
        argv = shlex.split(service["ExecStart"][0])
        return loop.Piece(name, argv, self.root / "logs" / f"{name}.log"), env, cwd


def test_the_operations_guide_literally_pages_and_heals_a_failed_dir(
        sandbox: SandboxState, tmp_path_factory: pytest.TempPathFactory) -> None:
    state = sandbox
    assert state.mode == "zk"  # so the guide's ZooKeeper collector runs too
    root = tmp_path_factory.mktemp("operations-root")
    receiver = PagerReceiver().start()
    install = Installed(root, state, receiver.pagerduty_url)
    started = {name: install.piece(name) for name in UNIT_OF}
    the_loop = loop.Loop(install.var, install.etc / "selfheal.toml", {
        "bus": {"topic_prefix": install.prefix},
        "serve": {"http_port": install.ports["serve"],
                  "api_token": install.secrets["SELFHEAL_SERVE_API_TOKEN"]}},
        {name: piece for name, (piece, _, _) in started.items()})

    def start(name: str) -> None:
        piece, env, cwd = started[name]
        piece.pid = processes.spawn(piece.argv, piece.log, cwd, env=env)

    am = prom = producer = None
    failed: list[tuple[int, str]] = []
    topic = f"ops-guide-{uuid.uuid4().hex[:6]}"
    try:
        for name in UNIT_OF:
            start(name)
        wait(lambda: api(the_loop, "GET", "/actions") is not None, "serve's API", the_loop, 90)
        wait_for_batches(the_loop, 0)
        token = install.secrets["SELFHEAL_SERVE_API_TOKEN"]
        am = alertmanager.start(root / "alertmanager", f"http://selfheal:{token}@127.0.0.1:"
                                f"{install.ports['serve']}/alertmanager")
        prom = prometheus.start_example(state, root / "prometheus", {
            name: f"127.0.0.1:{port}" for name, port in install.ports.items()}, am.url)
        # Prometheus scrapes every process at the port the guide fixed in the TOML file
        wait(lambda: {t["labels"]["process"] for t in prom.targets()
                      if t["labels"].get("job") == "selfheal" and t["health"] == "up"}
             == set(UNIT_OF), "every selfheal process scraped up", the_loop, 60)

        traffic.create_topic(state, topic, partitions=6, replication_factor=2)
        broker, path = holder(state, topic, [b.node_id for b in state.brokers])
        producer = traffic.BackgroundProducer(state, topic, rate_per_s=50)
        producer.start()
        time.sleep(2)
        seen = len(receiver.received)
        faulted = time.time()
        cluster.fail_disk(state, broker, path)
        failed.append((broker, path))

        first = wait(lambda: pages(receiver, "pagerduty", seen, event_action="trigger",
                           **{"class": "KafkaLogDirOffline", "component": f"broker {broker}"}),
             "a KafkaLogDirOffline page", the_loop, 300)[0]

        def fix_linked() -> str | None:
            for r in pages(receiver, "pagerduty", seen, event_action="trigger"):
                aid = r.body["payload"]["custom_details"].get("action_id")
                if r.body.get("links") and aid and \
                        api(the_loop, "GET", f"/actions/{aid}")["type"] == \
                        "fix_offline_replicas":
                    return str(aid)
            return None

        aid = wait(fix_linked, "a page carrying the fix's link", the_loop, 300)
        assert any(a["labels"]["alertname"] == "KafkaLogDirOffline" and a["state"] == "firing"
                   and a["labels"]["broker"] == str(broker) for a in prom.alerts())
        waiting = api(the_loop, "GET", f"/actions/{aid}")
        assert waiting["state"] == "awaiting_approval"  # the shipped policy asks for it

        # Backup and restore as the guide says, the fix still waiting for approval: its
        # own command line, the store where it says.
        (line,) = re.findall(r'`sqlite3 (\S+) "\.backup (\S+)"`', GUIDE.read_text())
        store = Path(install.here(line[0].replace("/prod-eu/", "/%i/")).replace(
            "<cluster_id>", safe_name(state.cluster_id)))
        assert store.is_file(), sorted(str(p) for p in install.var.rglob("*.sqlite*"))
        backup = root / line[1].lstrip("/")
        backup.parent.mkdir()
        subprocess.run(["sqlite3", str(store), f".backup {backup}"], check=True, timeout=60)
        assert the_loop.stop("serve", timeout=30)  # systemctl stop: SIGTERM, 30 s
        for lost in store.parent.glob(store.name + "*"):
            lost.unlink()  # the disk it lived on is gone
        shutil.copy(backup, store)
        start("serve")
        restored = wait(lambda: api(the_loop, "GET", f"/actions/{aid}"),
                        "serve answering from the restored store", the_loop, 90)
        assert restored["state"] == "awaiting_approval"
        assert restored["audit"][:len(waiting["audit"])] == waiting["audit"]
        listed = api(the_loop, "GET", "/actions?state=awaiting_approval")["actions"]
        assert aid in {a["id"] for a in listed}

        api(the_loop, "POST", f"/actions/{aid}/approve",
            {"actor": "operator", "reason": "the guide's test approves"})
        done = wait(lambda: (s := api(the_loop, "GET", f"/actions/{aid}"))["state"]
                    in ("succeeded", "failed", "cancelled", "expired") and s,
                    "the fix finishing", the_loop, 300)
        assert done["state"] == "succeeded", done["audit"]
        for p in traffic.partitions_settled(
                state, topic, lambda p: not p["offline_replicas"]
                and len(p["replica_nodes"]) == 2):
            assert not p["offline_replicas"] and len(p["replica_nodes"]) == 2, p
        print(f"[figures] the guide's install: dir {path} of broker {broker} paged "
              f"{first.at - faulted:.1f} s after the fault (Prometheus and Alertmanager "
              f"at the sandbox's 2 s / 0 s timings) and healed; the store restored from its "
              f"backup kept {len(waiting['audit'])} audit entries and the pending approval",
              file=sys.stderr)
    finally:
        if producer is not None:
            producer.stop()
        for closing in (prom, am):
            if closing is not None:
                closing.stop()
        for name in reversed(list(UNIT_OF)):
            the_loop.stop(name, signal.SIGTERM, timeout=120)
        receiver.stop()
        for broker, path in failed:
            if cluster.disk_failed(path):
                cluster.heal_disk(state.reload(), broker, path)
        traffic.delete_topic(state, topic)
        drop_topics(state, install.prefix)
