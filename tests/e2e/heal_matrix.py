"""The whole-loop heal on one sandbox, the same body on every Kafka line and mode
(test_heal_matrix_*.py; the ZooKeeper corner is test_heal_loop.py, with a real browser;
the secured sandbox's, test_secured_heal*.py): a dir fails under traffic, the loop
proposes one fix, it is approved through the API (or, ``paged``, through the signed
link of its page: paged_approval.py), `serve` moves the replicas, the cluster is whole
and every acknowledged message was read exactly once."""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from remediation.executor.lifecycle import is_terminal
from sandbox import cluster, loop, traffic, versions
from sandbox.state import SandboxState
from tests.conftest import prove
from tests.e2e.loop_support import dir_holding, drop_topics, on_dir_now, wait, wait_for_batches
from tests.e2e.paged_approval import PagedApproval
from tests.integration.secured_support import sandbox_secrets

POLICY = """
[actions]
fix_offline_replicas = "approve"
cordon_log_dir = "approve"
"""
# A dir back from its failure is trusted (and our cordon lifted) after this, in the loop.
TRUST_S = 15.0


def api(the_loop: loop.Loop, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        f"{the_loop.serve_url}/api{path}", method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {the_loop.api_token}",
                 "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.load(resp)


def fix_awaiting(the_loop: loop.Loop,
                 kind: str = "fix_offline_replicas") -> dict[str, Any] | None:
    """The action of ``kind`` that waits for a person's approval, if listed yet."""
    return next((a for a in api(the_loop, "GET", "/actions")["actions"]
                 if a["type"] == kind and a["state"] == "awaiting_approval"), None)


def finished(the_loop: loop.Loop, action_id: str) -> dict[str, Any] | None:
    """The action as serve shows it, once it is in a terminal state."""
    shown = api(the_loop, "GET", f"/actions/{action_id}")
    return shown if is_terminal(shown["state"]) else None


def heal_under_traffic(state: SandboxState, work: Path, record_property: Any,
                       prefix: str | None = None,
                       after: Callable[[loop.Loop, int, str], None] | None = None,
                       paged: PagedApproval | None = None) -> None:
    """``prefix``: the bus topics' (default: a fresh one; a secured sandbox's ACLs name
    `selfheal.`); ``after(loop, broker, dir)``: more on the loop once it healed the
    failed ``dir``, before it stops; ``paged``: the fix is paged and approved through
    its page's link (stopped here)."""
    (work / "policy.toml").write_text(POLICY)
    topic = f"e2e-heal-{uuid.uuid4().hex[:6]}"
    traffic.create_topic(state, topic, partitions=6, replication_factor=2)
    the_loop = loop.start(
        state, work, names=loop.pieces_for(state),
        overrides={"bus": {"topic_prefix": prefix or f"e2em{uuid.uuid4().hex[:6]}."},
                   "detect": {"leader_window_seconds": 86400.0,
                              "disk_skew_min_bytes": 1 << 40,
                              "returned_trust_seconds": TRUST_S},
                   **({"pager": paged.overrides()} if paged else {})},
        policy=str(work / "policy.toml"))
    consumer = traffic.BackgroundConsumer(state, topic)
    producer = traffic.BackgroundProducer(state, topic, rate_per_s=100)
    broker = 1
    path = dir_holding(state, broker, topic)
    try:
        wait_for_batches(the_loop, 0)
        wait(lambda: api(the_loop, "GET", "/actions") is not None, "serve API", the_loop)
        if paged is not None:
            paged.start(the_loop)
        consumer.start()
        producer.start()
        wait(lambda: len(producer.acked) > 100, "traffic flowing", the_loop, timeout=60)
        lost = {p for t, p in on_dir_now(state, broker, path) if t == topic}
        assert lost
        cluster.fail_disk(state, broker, path)
        failed_at, failed_epoch = time.monotonic(), time.time()

        fix = wait(lambda: fix_awaiting(the_loop), "fix awaiting approval", the_loop,
                   timeout=120)
        proposed = time.monotonic() - failed_at
        figures: dict[str, float] = {}
        if paged is not None:  # through its page's link, as the one paged would
            figures["fault -> page s"] = paged.approve(the_loop, fix) - failed_epoch
        else:
            api(the_loop, "POST", f"/actions/{fix['id']}/approve", {})
        approved_at = time.monotonic()

        done = wait(lambda: finished(the_loop, fix["id"]), "the fix finishing", the_loop,
                    timeout=300)
        healed = time.monotonic() - approved_at
        assert done["state"] == "succeeded", done
        approvers = [e["actor"] for e in done["audit"]
                     if e["to"] == "approved" and e["from"] != "approved"]
        assert len(approvers) == 1 and (paged is None or approvers[0].startswith("link ")), \
            done["audit"]
        fixes = [a for a in api(the_loop, "GET", "/actions")["actions"]
                 if a["type"] == "fix_offline_replicas"]
        assert [a["id"] for a in fixes] == [fix["id"]]  # one fix, not one per signal

        racks = {b.node_id: b.rack for b in state.brokers}
        for p in traffic.partitions_settled(
                state, topic, lambda p: not p["offline_replicas"]
                and len(p["replica_nodes"]) == 2):
            name = f"{topic}-{p['partition_index']}"
            assert len(p["replica_nodes"]) == 2 and not p["offline_replicas"], (name, p)
            assert len({racks[r] for r in p["replica_nodes"]}) == 2, name
            assert p["leader_id"] in p["replica_nodes"], name
        time.sleep(2)
        assert len(producer.acked) > 200
        assert traffic.delivery_problems(producer, consumer) == []
        line = versions.line(state.kafka).version
        record_property("figures", {"what": f"heal {line} {state.mode}",
                                    "fault -> fix s": proposed,
                                    "approval -> healed s": healed, **figures})
        prove(record_property, state, "detect", "fix")
        if after is not None:
            after(the_loop, broker, path)
    finally:
        producer.stop()
        consumer.stop()
        if paged is not None:
            paged.stop()
        the_loop.stop_all()
        drop_topics(state, the_loop.topic(""))
        if cluster.disk_failed(path):
            cluster.heal_disk(state.reload(), broker, path)
            state.reload()
        traffic.delete_topic(state, topic)


def _bus_records(state: SandboxState, prefix: str) -> dict[str, bytes]:
    """Every record's key and value on the loop's topics, by topic, read as the admin."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**cluster.client_config(state), "group.id": "unused",
                         "enable.auto.commit": False})
    try:
        topics = [t for t in consumer.list_topics(timeout=10).topics if t.startswith(prefix)]
        seen: dict[str, bytearray] = {}
        for topic in topics:
            for p in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                if high <= low:
                    continue
                consumer.assign([TopicPartition(topic, p, low)])
                read = 0
                while read < high - low:
                    msg = consumer.poll(5)
                    if msg is None:
                        break
                    if msg.error() is None:
                        seen.setdefault(topic, bytearray()).extend(
                            (msg.key() or b"") + (msg.value() or b""))
                        read += 1
        return {topic: bytes(records) for topic, records in seen.items()}
    finally:
        consumer.close()


def secured_heal(state: SandboxState, work: Path, record_property: Any) -> None:
    """The heal on a secured sandbox, each piece as its own principal (the bus topics are
    `selfheal.`, which its ACLs name), paged by Prometheus' alert and approved through
    the page's signed link; then no secret of the sandbox or the loop is in any process
    log, any record on the bus, any page or any API answer."""
    secrets = sandbox_secrets(state)
    paged = PagedApproval(state, work)

    def no_secret_anywhere(the_loop: loop.Loop, _broker: int, _dir: str) -> None:
        secrets["the link secret"] = str(the_loop.config["serve"]["link_secret"])
        secrets["the API token"] = the_loop.api_token
        outputs: dict[str, bytes] = {
            str(log): log.read_bytes() for log in Path(the_loop.work_dir, "logs").glob("*")}
        on_bus = _bus_records(state, the_loop.topic(""))
        outputs["records on the bus"] = b"".join(on_bus.values())
        outputs["the actions API"] = json.dumps(api(the_loop, "GET", "/actions")).encode()
        outputs["the pages"] = paged.pages()
        assert paged.receiver.invalid() == []
        # the metrics path scraped the exporters over HTTPS with basic auth: records, and
        # never a refused scrape (a metrics path without its settings reports nothing)
        assert on_bus.get(the_loop.topic("broker-metrics"))
        metrics_log = Path(the_loop.work_dir, "logs", "collect-metrics.log").read_text()
        assert "https://" in metrics_log and "ERROR exporter" not in metrics_log, metrics_log
        leaks = [(what, where) for where, text in outputs.items()
                 for what, secret in secrets.items() if secret.encode() in text]
        assert leaks == []

    heal_under_traffic(state, work, record_property, prefix="selfheal.",
                       after=no_secret_anywhere, paged=paged)
