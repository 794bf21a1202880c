"""A real Prometheus on the sandbox during a real log-dir failure: the alert rules fire
from the exporters (nothing injected), Alertmanager receives the alert, and every panel
of every dashboard runs its query there: none errs, and the panels that must show the
failed dir return data that says so."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from dashboards import build
from dashboards.panels import Panel
from sandbox import alertmanager, loop, processes, prometheus, traffic
from sandbox.cluster import disk_failed, fail_disk, heal_disk
from tests.conftest import run_cli
from tests.dashboards.queries import concrete, run_panels
from tests.polling import wait_until

pytestmark = pytest.mark.integration

TOPIC = "observe-dashboards"
PIECES = ("collect-metrics", "collect-zk", "collect-snapshots", "serve")


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 120.0) -> Any:
    return wait_until(probe, what, timeout, every=1.0)


def am_alerts(am: alertmanager.Alertmanager) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{am.url}/api/v2/alerts", timeout=5) as resp:
        return list(json.load(resp))


def fault_panels() -> list[tuple[str, Panel]]:
    return [(name, panel) for name, module in build.MODULES.items()
            for panel in module.panels() if panel.fault]


@pytest.fixture(scope="module")
def observed(sandbox, tmp_path_factory: pytest.TempPathFactory):
    """The loop's collectors and serve on fixed metrics ports, an Alertmanager, and our
    Prometheus scraping all of them; every process stopped by PID afterwards."""
    overrides = {"collect": {"metrics_http_port": processes.free_port(),
                             "zk_http_port": processes.free_port(),
                             "snapshots_http_port": processes.free_port()}}
    tmp_path = tmp_path_factory.mktemp("observe")
    running = loop.start(sandbox, tmp_path / "loop", names=PIECES, overrides=overrides)
    am = prom = None
    try:
        am = alertmanager.start(tmp_path / "alertmanager", running.serve_url + "/alertmanager")
        prom = prometheus.start(sandbox, alertmanager_url=am.url,
                                targets=prometheus.loop_targets(running.config))
        yield running, am, prom
    finally:
        if prom is not None:
            prom.stop()
        if am is not None:
            am.stop()
        running.stop_all()


def test_prometheus_scrapes_the_brokers_and_every_selfheal_process(sandbox, observed):
    _loop, _am, prom = observed
    assert prometheus.find(sandbox.work_dir) == prom
    shown = run_cli(["sandbox", "status"], sandbox)
    assert shown.returncode == 0, shown.stderr
    assert f"prometheus  {prom.url}" in shown.stdout

    def all_up() -> list[dict[str, Any]] | None:
        targets = prom.targets()
        ours = [t for t in targets if t["labels"]["job"] in ("kafka", "selfheal")]
        return ours if all(t["health"] == "up" for t in ours) else None

    targets = wait_for("every target up", all_up)
    jobs = sorted((t["labels"]["job"], t["labels"].get("broker") or t["labels"]["process"])
                  for t in targets)
    assert jobs == sorted([("kafka", str(b.node_id)) for b in sandbox.brokers]
                          + [("selfheal", p) for p in PIECES])
    assert {t["labels"]["cluster"] for t in targets} == {sandbox.cluster_id}
    groups = {g["name"] for g in prom.rule_groups()}
    assert groups == {"kafka-selfheal.kafka", "kafka-selfheal.selfheal",
                      "kafka-selfheal.recording"}
    assert all(r["health"] == "ok" for g in prom.rule_groups() for r in g["rules"])


def test_a_failed_dir_fires_the_alert_and_shows_on_every_dashboard(sandbox, observed):
    _loop, am, prom = observed
    cluster = sandbox.cluster_id
    traffic.create_topic(sandbox, TOPIC, partitions=6, replication_factor=3)
    traffic.produce(sandbox, TOPIC, 600)
    victim = traffic.leader_of(sandbox, TOPIC, 0)
    failed = traffic.log_dir_of(sandbox, TOPIC, 0, victim)
    where = f'log_dir="{failed}",broker="{victim}"'
    try:
        # healthy first: the dir is online in both views, nothing fires
        wait_for("the snapshot gauges", lambda: prom.query(
            f"selfheal_log_dir_online{{{where}}} == 1"))
        assert prom.query(f"kafka_log_log_directory_offline{{{where}}}")[0]["value"][1] == "0"
        assert not prom.query('ALERTS{alertname="KafkaLogDirOffline"}')

        fail_disk(sandbox, victim, failed)
        traffic.produce(sandbox, TOPIC, 600)  # the broker's next write finds the dir gone

        firing = wait_for("KafkaLogDirOffline firing in Prometheus", lambda: [
            a for a in prom.alerts() if a["labels"]["alertname"] == "KafkaLogDirOffline"
            and a["state"] == "firing"])
        assert [(a["labels"]["broker"], a["labels"]["log_dir"]) for a in firing] \
            == [(str(victim), failed)]
        labels = firing[0]["labels"]
        assert labels["severity"] == "critical" and labels["cluster"] == cluster
        assert firing[0]["annotations"]["runbook_url"] == "docs/runbooks/KafkaLogDirOffline.md"
        assert failed in firing[0]["annotations"]["description"]

        sent = wait_for("the alert in Alertmanager", lambda: [
            a for a in am_alerts(am) if a["labels"]["alertname"] == "KafkaLogDirOffline"])
        assert sent[0]["labels"]["log_dir"] == failed

        # every panel that must show the fault does, once the slowest figure (the next
        # snapshot, the next rule evaluation) has caught up
        for name, panel in fault_panels():
            expr = f"({concrete(panel.queries[0].expr, cluster)}){panel.fault}"
            wait_for(f"{name} / {panel.title}: {expr}", lambda e=expr: prom.query(e))
        assert prom.query(f"selfheal_log_dir_online{{{where}}} == 0")
        assert prom.query(f"selfheal_broker_offline_replicas{{broker=\"{victim}\"}} > 0")

        returned, errors = run_panels(prom, cluster)
        assert errors == []
        empty = sorted(key for key, n in returned.items() if n == 0)
        print("\npanels with data during the fault:")
        for name in build.MODULES:
            mine = [(t, n) for (d, t), n in returned.items() if d == name]
            shown = [t for t, n in mine if n]
            print(f"  {name}: {len(shown)}/{len(mine)} panels with data; without: "
                  f"{[t for t, n in mine if not n]}")
        # what stays empty without the Spark job running here, and nothing else
        assert {d for d, _ in empty} <= {"pipeline", "remediation"}, empty
    finally:
        if disk_failed(failed):
            heal_disk(sandbox, victim, failed)
        sandbox.reload()
        traffic.delete_topic(sandbox, TOPIC)


def test_the_cluster_variable_lists_the_sandbox(sandbox, observed):
    _loop, _am, prom = observed
    model = json.loads((build.JSON_DIR / "disks.json").read_text())
    (variable,) = [v for v in model["templating"]["list"] if v["name"] == "cluster"]
    match = variable["query"].removeprefix("label_values(").removesuffix(", cluster)")
    values = wait_for("the cluster label", lambda: prom.api(
        "label/cluster/values", **{"match[]": match}))
    assert values == [sandbox.cluster_id]
