"""core.live and core.bus on the real sandbox: the snapshot a live read gives,
before and after a log dir fails, and the selfheal.* topics the bus sets up."""

from __future__ import annotations

import time

import pytest

from core.bus import MAX_MESSAGE_BYTES, TOPIC_SPECS, ensure_topics
from core.config import load as load_config
from core.live import PlacementMemory, offline_dirs, open_admin, read_snapshot
from core.model import ClusterModel
from sandbox import cluster, traffic
from sandbox.status import kafka_admin, placement
from schemas.snapshot import snapshot_from_dict

pytestmark = pytest.mark.integration


def _config(state):
    return load_config(path=None, env={"SELFHEAL_SANDBOX_DIR": state.work_dir})


def test_live_snapshot_matches_describe_log_dirs_and_remembers_a_failed_dir(sandbox):
    topic = "live-snapshot"
    traffic.create_topic(sandbox, topic, partitions=4, replication_factor=2)
    traffic.produce(sandbox, topic, 200)
    memory = PlacementMemory()
    with open_admin(sandbox.bootstrap_servers) as admin:
        before = read_snapshot(admin, "sandbox-test", memory)
        replies = {b.node_id: admin.describe_log_dirs(brokers=[b.node_id])[0]
                   for b in sandbox.brokers}
    model = ClusterModel(snapshot_from_dict(before))  # the loader's checks all pass
    assert model.snapshot.cluster_id == "sandbox-test"
    assert {b["id"]: b["rack"] for b in before["brokers"]} == {
        b.node_id: b.rack for b in sandbox.brokers}
    mine = [p for p in before["partitions"] if p["topic"] == topic]
    assert [p["partition"] for p in mine] == [0, 1, 2, 3]
    for p in mine:
        for r in p["replicas"]:
            dirs = placement(replies[r["broker"]], topic)
            (where,) = [d for d, parts in dirs.items() if p["partition"] in parts]
            assert r["log_dir"] == where
            assert r["size_bytes"] == dirs[where][p["partition"]]
    assert sum(r["size_bytes"] for p in mine for r in p["replicas"]) > 0

    victim = mine[0]["replicas"][0]
    broker, path = victim["broker"], victim["log_dir"]
    on_dir = {(p["topic"], p["partition"]) for p in before["partitions"]
              for r in p["replicas"] if (r["broker"], r["log_dir"]) == (broker, path)}
    cluster.fail_disk(sandbox, broker, path)
    try:
        traffic.produce(sandbox, topic, 50)  # the broker notices on its next write
        deadline = time.monotonic() + 60
        with open_admin(sandbox.bootstrap_servers) as admin:
            while True:
                after = read_snapshot(admin, "sandbox-test", memory)
                if (broker, path) in offline_dirs(after) or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        assert offline_dirs(after) == {(broker, path)}
        kept = {(p["topic"], p["partition"]) for p in after["partitions"]
                for r in p["replicas"] if (r["broker"], r["log_dir"]) == (broker, path)}
        assert kept == on_dir
        offline_model = ClusterModel(snapshot_from_dict(after))
        offline = {(offline_model.snapshot.partitions[i].topic,
                    offline_model.snapshot.partitions[i].partition)
                   for i in offline_model.partitions_with_offline_replicas}
        assert offline == on_dir
    finally:
        cluster.heal_disk(sandbox, broker, path)
        sandbox.reload()


def test_ensure_topics_creates_every_bus_topic_once_with_its_settings(sandbox):
    config = _config(sandbox)
    first = ensure_topics(config)
    assert ensure_topics(config) == []
    names = {config.topic(n) for n in TOPIC_SPECS}
    assert set(first) <= names
    with kafka_admin(sandbox) as admin:
        existing = set(admin.list_topics())
        assert names <= existing
        from kafka.admin import ConfigResource, ConfigResourceType

        status = config.topic("action-status")
        snapshots = config.topic("cluster-snapshots")
        reply = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, status),
                                        ConfigResource(ConfigResourceType.TOPIC, snapshots)])
    topics = reply["topic"]
    assert topics[status]["cleanup.policy"]["value"] == "compact"
    assert int(topics[snapshots]["max.message.bytes"]["value"]) == MAX_MESSAGE_BYTES


def test_a_long_lived_admin_describes_a_broker_soon_after_it_restarts(sandbox):
    """kafka-python drops a broker that stopped from the admin's own broker list; unless
    that list is refreshed, every DescribeLogDirs naming the broker fails for five
    minutes after it is back (its snapshots then carry stale dirs)."""
    from core.live import describe_dirs

    broker = sandbox.brokers[2].node_id
    with open_admin(sandbox.bootstrap_servers) as admin:
        assert describe_dirs(admin, broker) is not None
        cluster.kill_broker(sandbox, broker, graceful=True)
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and any(
                    b["broker_id"] == broker for b in admin.describe_cluster()["brokers"]):
                time.sleep(0.5)
            assert describe_dirs(admin, broker, attempts=1) is None  # down: no answer
            time.sleep(2)  # the failed connection's metadata refresh, without the broker
        finally:
            cluster.start_broker(sandbox, broker)
        back = time.monotonic()
        answer = None
        while answer is None and time.monotonic() - back < 30:
            answer = describe_dirs(admin, broker, attempts=1)
            time.sleep(0.5)
    waited = time.monotonic() - back
    assert answer is not None, f"broker {broker} still unknown to the admin {waited:.0f} s on"
    assert all(d["online"] for d in answer.dirs.values())
