"""The whole loop on the ZooKeeper sandbox, as an operator lives it: a disk fails under
traffic; the collectors and the Spark job propose the fix; Alertmanager pages with the
alert; a human opens the one-click link in a real browser (Debian's Chromium through
Playwright) and confirms; `selfheal serve` moves the replicas; the cluster is whole and
the consumer has every acknowledged message exactly once.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from remediation.executor.lifecycle import is_terminal
from sandbox import alertmanager, cluster, loop, traffic
from sandbox.state import SandboxState
from tests.conftest import prove
from tests.e2e.heal_matrix import POLICY, api, fix_awaiting
from tests.e2e.loop_support import dir_holding, drop_topics, on_dir_now, wait, wait_for_batches

pytestmark = pytest.mark.e2e

def test_a_failed_disk_is_healed_after_one_click_in_a_real_browser(
        sandbox: SandboxState, tmp_path_factory, browser, record_property) -> None:
    state = sandbox
    work = tmp_path_factory.mktemp("heal-loop")
    (work / "policy.toml").write_text(POLICY)
    topic = f"e2e-heal-{uuid.uuid4().hex[:6]}"
    traffic.create_topic(state, topic, partitions=6, replication_factor=2)
    the_loop = loop.start(
        state, work, overrides={"bus": {"topic_prefix": f"e2eh{uuid.uuid4().hex[:6]}."},
                                "detect": {"leader_window_seconds": 86400.0,
                                           "disk_skew_min_bytes": 1 << 40}},
        policy=str(work / "policy.toml"))
    consumer = traffic.BackgroundConsumer(state, topic)
    producer = traffic.BackgroundProducer(state, topic, rate_per_s=100)
    am = None
    broker = 1
    path = dir_holding(state, broker, topic)
    try:
        wait_for_batches(the_loop, 0)
        wait(lambda: api(the_loop, "GET", "/actions") is not None, "serve API", the_loop)
        am = alertmanager.start(work / "am", the_loop.serve_url.replace(
            "http://", f"http://selfheal:{the_loop.api_token}@") + "/alertmanager")
        consumer.start()
        producer.start()
        time.sleep(2)
        on_failed = {p for t, p in on_dir_now(state, broker, path) if t == topic}
        cluster.fail_disk(state, broker, path)
        failed_at = time.monotonic()

        listed = wait(lambda: fix_awaiting(the_loop), "fix awaiting approval", the_loop,
                      timeout=90)
        proposed = time.monotonic() - failed_at
        aid = listed["id"]
        am.fire({"alertname": "KafkaLogDirOffline", "broker": str(broker), "log_dir": path,
                 "severity": "page"},
                {"summary": f"log dir {path} on broker {broker} is offline"})
        shown = wait(lambda: (a := api(the_loop, "GET", f"/actions/{aid}"))["alerts"] and a,
                     "the alert linked to the fix", the_loop, timeout=30)
        link = shown["approval_url"]

        page = browser.new_page()
        try:
            page.goto(link)
            body = page.content()
            assert "KafkaLogDirOffline" in body  # the alert that caused it
            for p in on_failed:
                assert f"{topic}" in body and str(p) in body
            clicked_at = time.monotonic()
            page.get_by_role("button", name="Approve and run").click()
            page.wait_for_load_state()
            assert page.locator("h1").inner_text() == "Approved"
            # The same link again (a second click, a replay): refused, nothing changes.
            page.goto(link)
            assert page.locator("h1").inner_text() == "Not approved"
            assert page.get_by_role("button").count() == 0
        finally:
            page.close()

        def finished() -> dict[str, Any] | None:
            shown = api(the_loop, "GET", f"/actions/{aid}")
            return shown if is_terminal(shown["state"]) else None

        done = wait(finished, "the fix finishing", the_loop, timeout=300)
        healed = time.monotonic() - clicked_at
        assert done["state"] == "succeeded", done
        record_property("figures", {"what": "heal 3.9.2 zk (click)", "fault -> fix s": proposed,
                                    "click -> healthy s": healed})
        prove(record_property, state, "detect", "fix")
        assert [e["actor"] for e in done["audit"] if e["to"] == "approved"] \
            and sum(1 for e in done["audit"] if e["to"] == "approved") == 1

        racks = {b.node_id: b.rack for b in state.brokers}
        for p in traffic.partitions_settled(
                state, topic, lambda p: not p["offline_replicas"]
                and len(p["replica_nodes"]) == 2):
            name = f"{topic}-{p['partition_index']}"
            assert len(p["replica_nodes"]) == 2, name
            assert not p["offline_replicas"], name
            assert len({racks[r] for r in p["replica_nodes"]}) == 2, name
            assert p["leader_id"] in p["replica_nodes"], name
        with urllib.request.urlopen(f"{the_loop.serve_url}/metrics", timeout=10) as resp:
            assert b"selfheal" in resp.read()
        from core.live import open_admin

        with open_admin(state.bootstrap_servers) as admin:
            leaderless = [(t["name"], p["partition_index"]) for t in admin.describe_topics()
                          for p in t["partitions"] if p["leader_id"] in (None, -1)]
        assert leaderless == []  # no offline partitions anywhere

        time.sleep(2)
        assert len(producer.acked) > 200
        assert traffic.delivery_problems(producer, consumer) == []
    finally:
        producer.stop()
        consumer.stop()
        if am is not None:
            am.stop()
        the_loop.stop_all()
        drop_topics(state, the_loop.topic(""))
        if cluster.disk_failed(path):
            cluster.heal_disk(state.reload(), broker, path)
