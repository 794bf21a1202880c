"""A failed log dir under traffic, fixed by `selfheal serve` after an approval through the API.

The whole path on the real sandbox: the fix is planned from a live snapshot, produced to
the actions topic, waits for approval (its link on stderr, the real Alertmanager's page
linked to it), is approved through the JSON API, and runs throttled; afterwards every
partition of the topic has its replicas on alive brokers over distinct racks and the
consumer has read every acknowledged message exactly once.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from core.plan import plan_offline, recovery
from core.plan.offline import received
from remediation.executor.throttle import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
)
from sandbox import alertmanager, cluster, traffic
from sandbox.state import SandboxState
from sandbox.status import kafka_admin
from schemas.records import Receiving, Trigger
from tests.integration.serve_harness import bench
from tests.polling import wait_until

pytestmark = pytest.mark.integration

THROTTLE = 256 * 1024  # bytes/s: slow enough to see the throttle while the copy runs
POLICY = f"""
[actions]
fix_offline_replicas = "approve"
[limits]
inter_broker_throttle_bytes_per_s = {THROTTLE}
"""
THROTTLE_KEYS = {LEADER_RATE, FOLLOWER_RATE, LEADER_REPLICAS, FOLLOWER_REPLICAS}


def prefill(state: SandboxState, topic: str, partitions: int, per_partition: int) -> None:
    """ASCII padding (the consumer decodes values) so each copy takes a few seconds."""
    from confluent_kafka import Producer

    producer = Producer({**cluster.client_config(state), "acks": "all",
                         "enable.idempotence": True, "linger.ms": 20})
    chunk = 64 * 1024
    for p in range(partitions):
        for i in range(per_partition // chunk):
            producer.produce(topic, f"pad-{p}-{i}-".encode() + b"x" * chunk, partition=p)
            producer.poll(0)
    assert producer.flush(60) == 0


def throttles_set(state: SandboxState, topic: str) -> dict[str, dict[str, str]]:
    """The throttle configs now set on every broker and on the topic."""
    from kafka.admin import ConfigResource, ConfigResourceType

    with kafka_admin(state) as admin:
        reply = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, str(b.node_id)) for b in state.brokers]
            + [ConfigResource(ConfigResourceType.TOPIC, topic)])
    out: dict[str, dict[str, str]] = {}
    for kind, by_name in reply.items():
        for name, configs in by_name.items():
            found = {k: v["value"] for k, v in configs.items() if k in THROTTLE_KEYS}
            if found:
                out[f"{kind}:{name}"] = found
    return out


def test_an_approved_fix_heals_a_failed_dir_under_traffic(sandbox: SandboxState,
                                                          tmp_path: Path) -> None:
    state = sandbox
    topic = f"serve-fix-{int(time.time())}"
    traffic.create_topic(state, topic, partitions=3, replication_factor=2)
    prefill(state, topic, 3, 1024 * 1024)
    victim = traffic.leader_of(state, topic, 0)
    failed = traffic.log_dir_of(state, topic, 0, victim)
    on_failed = {p["partition_index"] for p in traffic.partitions(state, topic)
                 if victim in p["replica_nodes"]
                 and traffic.log_dir_of(state, topic, p["partition_index"], victim) == failed}
    consumer = traffic.BackgroundConsumer(state, topic)
    producer = traffic.BackgroundProducer(state, topic, rate_per_s=100)
    consumer.start()
    producer.start()
    am = None
    with bench(state, tmp_path, POLICY) as b:
        try:
            serve = b.serve()
            am = alertmanager.start(
                tmp_path / "am", serve.url.replace("http://", f"http://selfheal:{b.token}@")
                + "/alertmanager")
            time.sleep(2)
            cluster.fail_disk(state, victim, failed)

            def planned():
                plan = plan_offline(b.model())
                targets = {(t.topic, t.partition) for t in plan.reassignment.partitions}
                return plan if {(topic, p) for p in on_failed} <= targets else None

            plan = wait_until(planned, f"the failed dir {failed} seen in a live snapshot", 60)
            model = b.model()
            sizes = {(p.topic, p.partition): max(r.size_bytes for r in p.replicas)
                     for p in model.partitions}
            got = [Receiving(r.broker, r.bytes, r.replicas)
                   for r in received(model, plan.reassignment.partitions)]
            action = b.action("fix_offline_replicas", plan,
                              f"log dir {failed} on broker {victim} failed",
                              bytes_moved=sum(sizes.get((t.topic, t.partition), 0)
                                              for t in plan.reassignment.partitions),
                              trigger=Trigger("logdir_event", victim, failed), received=got)
            aid = b.propose(action)
            serve.wait_state(aid, {"awaiting_approval"})
            link = serve.wait_line(rf"action {aid[:12]} \(fix_offline_replicas\) awaits "
                                   r"approval: http://\S+/approve/").rsplit(" ", 1)[1]

            # The real Alertmanager pages the webhook; the alert is linked to the fix and
            # shown on its approval page.
            am.fire({"alertname": "KafkaLogDirOffline", "broker": str(victim),
                     "log_dir": failed, "severity": "page"},
                    {"summary": f"log dir {failed} on broker {victim} is offline"})
            wait_until(lambda: serve.action(aid)["alerts"], "the alert linked to the fix", 30)
            status, page, _ = serve.http("GET", link.removeprefix(serve.url))
            assert status == 200 and "KafkaLogDirOffline" in page and "Approve and run" in page
            # How long the copy takes at the throttle serve's policy sets.
            assert f"Recovery: {recovery.estimate(got, THROTTLE)}." in page

            approved_at = time.monotonic()
            status, body = serve.api("POST", f"/actions/{aid}/approve", {"actor": "alice"})
            assert status == 200 and body["state"] == "approved", body

            # During the copy the throttle is on the brokers and the topic ...
            during = wait_until(lambda: throttles_set(state, topic).get(f"topic:{topic}"),
                                "the replication throttle on the topic", 60, every=0.2)
            assert during[LEADER_REPLICAS] and during[FOLLOWER_REPLICAS]
            assert any(v.get(LEADER_RATE) == str(THROTTLE)
                       for v in throttles_set(state, topic).values())
            assert serve.action(aid)["state"] in ("executing", "verifying", "succeeded")

            done = serve.wait_state(aid, {"succeeded"}, timeout=300)
            healed_after = time.monotonic() - approved_at
            print(f"\n[serve] approval -> healthy cluster: {healed_after:.1f} s for "
                  f"{len(plan.reassignment.partitions)} partitions "
                  f"({action.summary.bytes / 2**20:.1f} MiB) at {THROTTLE // 1024} KiB/s")
            assert done["audit"][-1]["to"] == "succeeded"
            assert [a["actor"] for a in done["audit"] if a["to"] == "approved"] == ["alice"]

            # ... and gone afterwards, on every broker and the topic.
            assert throttles_set(state, topic) == {}

            racks = {s.node_id: s.rack for s in state.brokers}
            alive = {s.node_id for s in state.brokers}
            for p in traffic.partitions(state, topic):
                name = f"{topic}-{p['partition_index']}"
                assert len(p["replica_nodes"]) == 2, name
                assert not p["offline_replicas"], name
                assert set(p["replica_nodes"]) <= alive, name
                assert len({racks[r] for r in p["replica_nodes"]}) == 2, name
                assert sorted(p["isr_nodes"]) == sorted(p["replica_nodes"]), name
                assert p["leader_id"] in p["replica_nodes"], name
            # no partition the plan covered is left offline
            after = b.model()
            offline = {(p.topic, p.partition) for i in after.partitions_with_offline_replicas
                       for p in [after.partitions[i]]}
            assert offline.isdisjoint((t.topic, t.partition)
                                      for t in plan.reassignment.partitions)

            time.sleep(2)
            assert len(producer.acked) > 200
            assert traffic.delivery_problems(producer, consumer) == []
        finally:
            producer.stop()
            consumer.stop()
            if am is not None:
                am.stop()
            if cluster.disk_failed(failed):
                cluster.heal_disk(state.reload(), victim, failed)
