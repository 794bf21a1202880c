"""Detect, end to end on the ZooKeeper sandbox: the three real collectors and the real
Spark job (`sandbox.loop`), a real disk fault, the action read back from the bus.

One loop serves the module (a Spark start costs 10-20 s), on topics with a prefix of
its own, so nothing else on the sandbox reaches it. Every test heals what it breaks.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from core.live import open_admin, read_snapshot
from core.model import ClusterModel
from core.plan.disks import broker_usage, mean_ratio
from sandbox import cluster, loop, traffic
from sandbox.fill import fill_disk
from schemas import wire
from schemas.registry import validate
from schemas.snapshot import snapshot_from_dict
from tests.e2e.loop_support import (
    dir_holding,
    drop_topics,
    fail_and_wait_for_fix,
    named,
    parsed,
    values,
    wait_for_batches,
    wait_reported_again,
)
from tests.integration.collect_support import TopicReader

pytestmark = pytest.mark.e2e

SKEW_THRESHOLD = 1.10
MIN_SKEW_BYTES = 1 << 20


@pytest.fixture(scope="module")
def detect(sandbox, tmp_path_factory):
    """Collectors + stream on the sandbox, and readers of what the loop writes."""
    prefix = f"e2e{uuid.uuid4().hex[:6]}."
    the_loop = loop.start(
        sandbox, tmp_path_factory.mktemp("detect-loop"),
        names=("collect-metrics", "collect-zk", "collect-snapshots", "stream"),
        overrides={
            "bus": {"topic_prefix": prefix},
            "collect": {"snapshot_interval_seconds": 5.0},
            "detect": {"disk_skew_threshold": SKEW_THRESHOLD, "skew_window_seconds": 8.0,
                       "disk_skew_min_bytes": MIN_SKEW_BYTES,
                       # Leader balance is not what these tests are about.
                       "leader_window_seconds": 86400.0},
        })
    readers = {}
    try:
        wait_for_batches(the_loop, 0)
        for name in ("actions", "dead-letter", "logdir-events", "cluster-snapshots",
                     "broker-metrics"):
            readers[name] = TopicReader(sandbox, prefix + name)
            readers[name].start()
        yield the_loop, readers
    finally:
        for reader in readers.values():
            reader.stop()
        the_loop.stop_all()
        drop_topics(sandbox, prefix)


def test_a_failed_dir_yields_one_fix_while_the_collectors_keep_reporting_it(
        sandbox, detect, record_property):
    """A restart repeating nothing is the chaos suite's (tests/chaos/test_kills.py: the
    job and the collectors SIGKILLed right after a fault) and the stream test's (a
    restart and a replay, tests/integration/test_stream_job.py)."""
    the_loop, readers = detect
    topic = f"e2e-detect-{uuid.uuid4().hex[:6]}"
    traffic.create_topic(sandbox, topic, partitions=6, replication_factor=2)
    traffic.produce(sandbox, topic, 60)
    broker = 1
    path = dir_holding(sandbox, broker, topic)
    try:
        fix, latency = fail_and_wait_for_fix(sandbox, the_loop, readers, broker, path, topic)
        record_property("figures", {"what": "detect (ZooKeeper)",
                                    "znode seen -> action on the bus s": latency})
        assert fix["plan"]["partitions"], "an RF 2 topic on 3 brokers has room to move"

        def same_id(msgs):
            return [a for a in parsed(msgs)
                    if a["action_id"] == fix["action_id"]]

        # The gauge (scrapes) and snapshots keep reporting the dir: still one.
        wait_reported_again(the_loop, readers, fix)
        assert len(same_id(readers["actions"].messages)) == 1
        assert [a["action_id"] for a in values(readers["actions"])
                if a["type"] == "fix_offline_replicas"
                and a["trigger"].get("log_dir") == path] == [fix["action_id"]]
    finally:
        if cluster.disk_failed(path):
            cluster.heal_disk(sandbox, broker, path)
            sandbox.reload()


def test_malformed_records_on_every_input_go_to_the_dead_letter_topic(sandbox, detect):
    the_loop, readers = detect
    prefix = the_loop.config["bus"]["topic_prefix"]
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": sandbox.bootstrap_servers})
    tag = uuid.uuid4().hex[:8]
    sent = {
        "broker-metrics": [f"garbage {tag}".encode(),
                           json.dumps({"version": 1, "cluster_id": tag, "broker": "one",
                                       "metric": "kafka_log_size", "value": 1,
                                       "event_time": "2026-11-22T00:00:00Z"}).encode()],
        "logdir-events": [json.dumps({"version": 1, "cluster_id": tag,
                                      "kind": "log_dir_failure"}).encode(),
                          b"\xff\xfe\x00" + tag.encode()],
        "cluster-snapshots": [json.dumps({"version": 1, "cluster_id": tag,
                                          "taken_at": "yesterday", "brokers": [],
                                          "partitions": []}).encode()],
    }
    failed = []
    for topic, records in sent.items():
        for raw in records:
            # the snapshot topic is compacted: Kafka takes only keyed records there
            producer.produce(prefix + topic, raw, key=tag.encode(),
                             on_delivery=lambda err, _msg: err and failed.append(err))
    assert producer.flush(30) == 0
    assert failed == []

    def mine(msgs):
        letters = [wire.record("dead-letter", m.value) for m in msgs]
        return [d for d in letters if tag in d["raw"]]

    try:
        letters = readers["dead-letter"].wait_for(
            lambda msgs: (found := mine(msgs)) and len(found) >= 5 and found,
            timeout=120, what="five dead letters")
    except AssertionError as exc:
        got = [(d["source_topic"], d["raw"][:40]) for d in mine(readers["dead-letter"].messages)]
        raise AssertionError(f"{exc}; the ones that came: {got}") from None
    assert len(letters) == 5
    for letter in letters:
        validate("dead-letter", letter)
        assert letter["reason"], letter
    reasons = {d["source_topic"]: d["reason"] for d in letters}
    assert set(reasons) == {prefix + t for t in sent}
    the_loop.check_alive()


def test_after_a_zookeeper_restart_the_next_failure_is_still_detected(sandbox, detect):
    the_loop, readers = detect
    topic = f"e2e-zk-restart-{uuid.uuid4().hex[:6]}"
    traffic.create_topic(sandbox, topic, partitions=6, replication_factor=2)
    traffic.produce(sandbox, topic, 60)
    zk_log = the_loop.pieces["collect-zk"]
    reconnects = zk_log.log_tail(100000).count("reconnected to ZooKeeper")
    cluster.stop_zookeeper(sandbox)
    time.sleep(3)  # long enough for the collector's session to be SUSPENDED
    cluster.start_zookeeper(sandbox)
    cluster.wait_ready(sandbox.reload(), timeout=120)
    deadline = time.monotonic() + 60
    while zk_log.log_tail(100000).count("reconnected to ZooKeeper") <= reconnects:
        assert time.monotonic() < deadline, "the ZooKeeper collector did not reconnect:\n" \
            + zk_log.log_tail()
        time.sleep(0.5)
    traffic.produce(sandbox, topic, 60)  # the cluster serves again
    broker = 2
    path = dir_holding(sandbox, broker, topic)
    try:
        # No time bound here: the point is that detection survives the outage.
        fail_and_wait_for_fix(sandbox, the_loop, readers, broker, path, topic,
                              fix_timeout=180)
    finally:
        if cluster.disk_failed(path):
            cluster.heal_disk(sandbox, broker, path)
            sandbox.reload()


def _excess(model: ClusterModel, broker: int) -> float:
    """Bytes the fullest dir of ``broker`` holds above its limit (negative: within it)."""
    dirs = broker_usage(model, broker)
    if len(dirs) < 2:
        return float("-inf")
    mean = mean_ratio(dirs)
    return max(d.used - SKEW_THRESHOLD * mean * d.capacity for d in dirs)


def test_a_filled_dir_yields_moves_that_bring_the_broker_under_the_threshold(
        sandbox, detect):
    the_loop, readers = detect
    with open_admin(sandbox.bootstrap_servers) as admin:
        model = ClusterModel(snapshot_from_dict(read_snapshot(admin, sandbox.cluster_id)))
    moved_before = {a["trigger"].get("broker") for a in values(readers["actions"])
                    if a["type"] == "move_replica_dirs"}
    # A broker the detector does not count as skewed (not past the limit by min bytes).
    calm = [b for b in sorted(model.alive)
            if _excess(model, b) < MIN_SKEW_BYTES and b not in moved_before]
    assert calm, "every broker is skewed already; nothing left to skew on purpose"
    broker = calm[0]
    dirs = sorted(broker_usage(model, broker), key=lambda d: d.used)
    # Enough bytes on the emptiest dir to put it well past the threshold.
    total = sum(d.used for d in dirs)
    need = (SKEW_THRESHOLD * total / len(dirs) - dirs[0].used) / (1 - SKEW_THRESHOLD / len(dirs))
    topic = fill_disk(sandbox, broker, dirs[0].path, int(max(need * 1.5, 0) + (32 << 20)),
                      partitions=4)
    try:
        _check_moves(sandbox, readers, broker, topic)
    finally:
        traffic.delete_topic(sandbox, topic)  # the sandbox is shared: leave no skew behind
    the_loop.check_alive()


def _check_moves(sandbox, readers, broker: int, topic: str) -> None:

    def moves(msgs):
        return [a for a in parsed(msgs)
                if a["type"] == "move_replica_dirs" and a["trigger"].get("broker") == broker]

    (move,) = readers["actions"].wait_for(moves, timeout=120, what="move_replica_dirs")
    validate("action", move)
    assert any(t == topic for t, _ in named(move))
    with open_admin(sandbox.bootstrap_servers) as admin:
        now = read_snapshot(admin, sandbox.cluster_id)
    assert _excess(ClusterModel(snapshot_from_dict(now)), broker) > MIN_SKEW_BYTES
    targets = {(p["topic"], p["partition"]): p for p in move["plan"]["partitions"]}
    for p in now["partitions"]:
        target = targets.get((p["topic"], p["partition"]))
        for r in p["replicas"] if target else ():
            if r["broker"] == broker:
                r["log_dir"] = target["log_dirs"][target["replicas"].index(broker)]
    moved = ClusterModel(snapshot_from_dict(now))
    assert _excess(moved, broker) < 1.0, [(d.path, d.used) for d in broker_usage(moved, broker)]
