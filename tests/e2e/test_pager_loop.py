"""The pager leg of the whole loop, with nothing injected: a dir fails under traffic, the
broker's JMX exporter shows it, the sandbox's real Prometheus fires KafkaLogDirOffline, a
real Alertmanager hands it to `selfheal serve`, and serve pages a local receiver standing
in for PagerDuty and Slack (it checks both formats). The page carries the fix's signed
one-click link; a link unfurler's GET changes nothing; Chromium opens the link from the
received payload and confirms; the fix runs; the disk is replaced, the alert resolves and
the pager receives the resolve. Fault -> page figures printed (more runs, one broker
each, with SELFHEAL_PAGER_RUNS).
"""

from __future__ import annotations

import json
import os
import statistics
import time
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from remediation.executor.lifecycle import is_terminal
from remediation.service.links import LinkSigner
from sandbox import alertmanager, cluster, loop, prometheus, traffic
from sandbox.pager_receiver import ROUTING_KEY, PagerReceiver, Received
from sandbox.state import SandboxState
from tests.dashboards.queries import concrete, run_panels
from tests.e2e.loop_support import drop_topics, wait, wait_for_batches
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

# One run in `make test`; SELFHEAL_PAGER_RUNS=3 for fault -> page figures over every broker.
RUNS = int(os.environ.get("SELFHEAL_PAGER_RUNS", "1"))  # one broker each, at most 3
POLICY = """
[actions]
fix_offline_replicas = "approve"
"""
SCREENSHOT_DIR = Path(os.environ.get("SELFHEAL_SCREENSHOT_DIR", "/tmp/selfheal-screenshots"))


def api(the_loop: loop.Loop, path: str) -> Any:
    request = urllib.request.Request(f"{the_loop.serve_url}/api{path}",
                                     headers={"Authorization": f"Bearer {the_loop.api_token}"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.load(resp)


def webhook(the_loop: loop.Loop, body: Any, token: str | None) -> int:
    """POST an Alertmanager payload to serve's webhook; the HTTP status."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(f"{the_loop.serve_url}/alertmanager", method="POST",
                                     data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def pages(receiver: PagerReceiver, channel: str, since: int, **match: Any) -> list[Received]:
    """What `channel` accepted after the first `since` requests, matching PagerDuty fields
    (event_action, class, component) or, for Slack, text in the first block."""
    found = []
    for r in receiver.accepted(channel):
        if receiver.received.index(r) < since:
            continue
        body = r.body
        if channel == "pagerduty":
            p = body.get("payload", {})
            if any((body.get(k) if k in ("event_action", "dedup_key") else p.get(k)) != v
                   for k, v in match.items()):
                continue
        elif not all(v in body["blocks"][0]["text"]["text"] for v in match.values()):
            continue
        found.append(r)
    return found


def holder(state: SandboxState, topic: str, brokers: list[int],
           timeout: float = 60.0) -> tuple[int, str]:
    """(broker, log dir) of a replica of `topic` on one of `brokers`, by DescribeLogDirs."""
    from core.live import open_admin

    deadline = time.monotonic() + timeout
    while True:
        with open_admin(state.bootstrap_servers) as admin:
            for b in brokers:
                (reply,) = admin.describe_log_dirs(brokers=[b])
                for d in reply["log_dirs"]:
                    if any(t["name"] == topic for t in d["topics"]):
                        return b, d["log_dir"]
        assert time.monotonic() < deadline, f"no broker of {brokers} holds {topic}"
        time.sleep(1)


def one_run(state: SandboxState, the_loop: loop.Loop, receiver: PagerReceiver,
            prom: prometheus.Prometheus, signer: LinkSigner, browser: Any, run: int,
            unused: list[int], producers: list[traffic.BackgroundProducer],
            failed: list[tuple[int, str]]) -> float:
    """Fail one dir of one of the `unused` brokers and follow its page to the resolve;
    fault -> page seconds."""
    topic = f"e2e-pager-{run}-{uuid.uuid4().hex[:6]}"
    traffic.create_topic(state, topic, partitions=6, replication_factor=2)
    # Kafka places the topic itself: fail a dir, of a broker not failed before, that holds
    # some of it, as the broker itself reports (after a broker restart, Metadata from one
    # broker was seen leaving another out of new topics' replica lists).
    broker, path = holder(state, topic, unused)
    unused.remove(broker)
    producer = traffic.BackgroundProducer(state, topic, rate_per_s=50)
    producers.append(producer)
    producer.start()
    time.sleep(2)
    # Healthy first: nothing fires for this dir.
    assert not [a for a in prom.alerts()
                if a["labels"]["alertname"] == "KafkaLogDirOffline"
                and a["labels"].get("broker") == str(broker)]
    seen = len(receiver.received)
    faulted = time.time()
    cluster.fail_disk(state, broker, path)
    failed.append((broker, path))

    trigger = wait(lambda: pages(receiver, "pagerduty", seen, event_action="trigger",
                                 **{"class": "KafkaLogDirOffline",
                                    "component": f"broker {broker}"}),
                   "a KafkaLogDirOffline page", the_loop, 300)[0]
    def fix_page() -> list[Received]:
        """The page carrying the link of the fix (an operator page for what the fix
        cannot repair may be linked first; the pager then sends the fix's link)."""
        for r in pages(receiver, "pagerduty", seen, event_action="trigger",
                       dedup_key=trigger.body["dedup_key"]):
            aid = r.body["payload"]["custom_details"].get("action_id")
            if r.body.get("links") and aid and \
                    api(the_loop, f"/actions/{aid}")["type"] == "fix_offline_replicas":
                return [r]
        return []

    linked = wait(fix_page, "a page carrying the fix's link", the_loop, 300)[0]
    latency = linked.at - faulted
    labels = linked.body["payload"]["custom_details"]["labels"]
    assert labels["log_dir"] == path and labels["cluster"] == state.cluster_id
    # It fired in Prometheus from the exporter, nothing injected.
    assert any(a["labels"]["alertname"] == "KafkaLogDirOffline"
               and a["labels"]["broker"] == str(broker) and a["state"] == "firing"
               for a in prom.alerts())

    href = linked.body["links"][0]["href"]
    token = href.split("/approve/", 1)[1]
    aid = linked.body["payload"]["custom_details"]["action_id"]
    assert signer.verify(token, datetime.now(UTC), aid).action_id == aid
    shown = api(the_loop, f"/actions/{aid}")
    assert shown["type"] == "fix_offline_replicas"
    assert shown["state"] == "awaiting_approval"
    trig = shown["record"]["trigger"]
    assert (trig["broker"], trig["log_dir"]) == (broker, path)
    slack = wait(lambda: [e for r in pages(receiver, "slack", seen,
                                           alert="KafkaLogDirOffline")
                          for b in r.body["blocks"] if b["type"] == "actions"
                          for e in b["elements"] if e["url"] == href],
                 "the Slack message with the fix's button", the_loop, 30)
    button = slack[0]

    # A link unfurler fetches it: a GET shows the page and approves nothing.
    with urllib.request.urlopen(href, timeout=10) as resp:
        assert resp.status == 200
    assert api(the_loop, f"/actions/{aid}")["state"] == "awaiting_approval"

    page = browser.new_page(viewport={"width": 1100, "height": 900})
    try:
        page.goto(button["url"])  # from the received Slack payload
        assert "KafkaLogDirOffline" in page.content()
        if run == 0:
            SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
            shot = SCREENSHOT_DIR / "pager-approval-page.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"\napproval page screenshot: {shot}")
        page.get_by_role("button", name="Approve and run").click()
        page.wait_for_load_state()
        assert page.locator("h1").inner_text() == "Approved"
    finally:
        page.close()

    done = wait(lambda: (s := api(the_loop, f"/actions/{aid}"))
                and is_terminal(s["state"]) and s, "the fix finishing", the_loop, 300)
    assert done["state"] == "succeeded", done
    # approved once (a duplicate proposal taken in meanwhile is audited approved ->
    # approved, "ignored": not a second approval)
    assert sum(1 for e in done["audit"] if e["to"] == "approved"
               and e["from"] != "approved") == 1
    for p in traffic.partitions_settled(
            state, topic, lambda p: not p["offline_replicas"] and len(p["replica_nodes"]) == 2):
        assert not p["offline_replicas"] and len(p["replica_nodes"]) == 2, p
    # The page stays open while the disk is still broken.
    assert not pages(receiver, "pagerduty", seen, event_action="resolve",
                     dedup_key=linked.body["dedup_key"])

    cluster.heal_disk(state.reload(), broker, path)  # the disk is replaced
    failed.remove((broker, path))
    resolve = wait(lambda: pages(receiver, "pagerduty", seen, event_action="resolve",
                                 dedup_key=linked.body["dedup_key"]),
                   "the PagerDuty resolve", the_loop, 180)[0]
    assert resolve.body == {"routing_key": ROUTING_KEY, "event_action": "resolve",
                            "dedup_key": linked.body["dedup_key"]}
    wait(lambda: pages(receiver, "slack", seen, resolved="Resolved:",
                       name="KafkaLogDirOffline"),
         "the Slack resolve", the_loop, 30)
    audit = [e["reason"] for e in api(the_loop, f"/actions/{aid}")["audit"]
             if e["actor"] == "pager"]
    assert any("delivered (HTTP 202)" in r for r in audit), audit
    assert any("resolved" in r for r in audit), audit
    producer.stop()
    print(f"run {run}: broker {broker} {path}: fault -> first page "
          f"{trigger.at - faulted:.1f} s, page with the fix's link {latency:.1f} s; "
          f"resolve {resolve.at - linked.at:.0f} s after it (click, fix, disk replaced)")

    return latency


def test_a_real_alert_pages_with_the_fix_link_and_the_resolve_follows(
        sandbox: SandboxState, tmp_path_factory, browser) -> None:
    state = sandbox
    work = tmp_path_factory.mktemp("pager-loop")
    (work / "policy.toml").write_text(POLICY)
    receiver = PagerReceiver().start()
    pager = {"pagerduty_url": receiver.pagerduty_url, "pagerduty_routing_key": ROUTING_KEY,
             "slack_webhook_url": receiver.slack_url, "retry_initial_seconds": 0.5,
             "retry_max_seconds": 5.0, "link_wait_seconds": 90.0}
    the_loop = loop.start(
        state, work / "loop", policy=str(work / "policy.toml"),
        overrides={"bus": {"topic_prefix": f"e2ep{uuid.uuid4().hex[:6]}."},
                   "detect": {"leader_window_seconds": 86400.0,
                              "disk_skew_min_bytes": 1 << 40},
                   "pager": pager})
    signer = LinkSigner(the_loop.config["serve"]["link_secret"].encode())
    am = prom = None
    producers: list[traffic.BackgroundProducer] = []
    failed: list[tuple[int, str]] = []
    latencies: list[float] = []
    try:
        wait_for_batches(the_loop, 0)
        wait(lambda: api(the_loop, "/actions") is not None, "serve API", the_loop, 60)
        am = alertmanager.start(work / "am", the_loop.serve_url.replace(
            "http://", f"http://selfheal:{the_loop.api_token}@") + "/alertmanager")
        prom = prometheus.start(state, alertmanager_url=am.url,
                                targets=the_loop.metrics_targets())
        unused = [b.node_id for b in state.brokers]
        for run in range(RUNS):
            latencies.append(one_run(state, the_loop, receiver, prom, signer, browser, run,
                                     unused, producers, failed))
        assert receiver.invalid() == [], [(r.channel, r.problems) for r in receiver.invalid()]
        # The job's panels on this real Prometheus, with the job running (the observe
        # test runs none): every "Job ..." panel of the pipeline dashboard has a series.
        def job_panels() -> dict[str, int]:
            returned, errors = run_panels(prom, state.cluster_id)
            assert errors == []
            return {title: n for (board, title), n in returned.items()
                    if board == "pipeline" and title.startswith("Job ")}

        def all_with_data() -> dict[str, int] | None:
            panels = job_panels()
            return panels if all(panels.values()) else None

        job = wait_until(all_with_data, "data on the pipeline dashboard's job panels", 60,
                         every=2.0, explain=lambda: str(job_panels()))
        assert set(job) == {"Job input rate", "Job micro-batch duration",
                            "Job time by micro-batch phase"}
        phases = {s["metric"]["phase"] for s in prom.query(concrete(
            'sum by (phase) (selfheal_stream_batch_phase_seconds_total{cluster=~"$cluster"})',
            state.cluster_id))}
        assert {"addBatch", "latestOffset"} <= phases and "triggerExecution" not in phases
        # Bad input on the real serve's webhook: another payload version, no token, a
        # wrong one. Each refused; nothing paged, nothing changed.
        def ids() -> set[str]:
            return {a["id"] for a in api(the_loop, "/actions")["actions"]}

        before = (len(receiver.received), ids())
        hook = {"version": "3", "groupKey": "{}:{}", "status": "firing", "receiver": "x",
                "alerts": [{"status": "firing", "labels": {
                    "alertname": "KafkaLogDirOffline", "broker": "0", "log_dir": "/x",
                    "cluster": state.cluster_id}, "annotations": {},
                    "startsAt": "2026-01-01T00:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
                    "fingerprint": "ffff0000ffff0000"}]}
        for version, token, status in (("3", the_loop.api_token, 400), ("4", None, 401),
                                       ("4", "wrong", 403)):
            assert webhook(the_loop, {**hook, "version": version}, token) == status
        time.sleep(3)  # a few pager passes
        # Nothing paged; no action from the refused hooks (the detector may still propose
        # about the runs' own disks meanwhile: those name real dirs, never "/x").
        assert len(receiver.received) == before[0]
        made = [a for a in ids() - before[1]
                if "/x" in json.dumps(api(the_loop, f"/actions/{a}")["record"])]
        assert made == []
        print(f"fault -> page over {len(latencies)} runs: p50 "
              f"{statistics.median(latencies):.1f} s, max {max(latencies):.1f} s "
              f"({', '.join(f'{x:.1f}' for x in latencies)})")
    finally:
        for producer in producers:
            producer.stop()
        if prom is not None:
            prom.stop()
        if am is not None:
            am.stop()
        the_loop.stop_all()
        receiver.stop()
        for broker, path in failed:
            if cluster.disk_failed(path):
                cluster.heal_disk(state.reload(), broker, path)
        drop_topics(state, the_loop.topic(""))
