"""`selfheal collect snapshots` against the sandbox, in ZooKeeper and KRaft mode."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
import types

import pytest

from core import clock
from core.bus import producer
from sandbox import cluster, traffic
from sandbox.status import kafka_admin, placement
from schemas.records import LogDirEvent
from schemas.snapshot import Snapshot, parse_snapshot
from schemas.snapshot_chunks import DELTA, MANIFEST, kind_of
from schemas.snapshot_delta import check_delta
from tests.integration.collect_support import (
    Collector,
    TopicReader,
    sandbox_config,
    snapshots,
)

pytestmark = pytest.mark.integration

SNAPSHOTS = "selfheal.cluster-snapshots"
EVENTS = "selfheal.logdir-events"
QUIET = ["--interval", "600", "--probe-interval", "600"]  # only events trigger snapshots


def _snapshots(messages) -> list[Snapshot]:
    # each one assembled from its chunks, loaded and validated
    return [parse_snapshot(m.value) for m in snapshots(messages)]


def _started(state, args: list[str], env: dict[str, str] | None = None) -> Collector:
    collector = Collector(state, ["snapshots", *args], env)
    try:
        collector.wait_for_line(r"snapshot \(start-up\)")
    except BaseException:
        collector.stop()
        raise
    return collector


def _send_events(state, events: list[LogDirEvent]) -> float:
    """Produce ``events`` as the ZooKeeper collector would; the time they were acked."""
    bus = producer(sandbox_config(state))
    for event in events:
        bus.produce(EVENTS, event.to_json(), f"{event.cluster_id}/{event.broker}".encode())
    assert bus.flush(30) == 0
    return time.monotonic()


def _failure(cluster_id: str, broker: int) -> LogDirEvent:
    return LogDirEvent(cluster_id=cluster_id, event_time=clock.text(), source="zookeeper",
                       kind="log_dir_failure", broker=broker,
                       znode="/log_dir_event_notification/log_dir_event_0000000042")


def test_a_snapshot_has_every_partition_and_the_dirs_describe_log_dirs_gives(sandbox):
    topic = "collect-snapshot-match"
    traffic.create_topic(sandbox, topic, partitions=4, replication_factor=2)
    traffic.produce(sandbox, topic, 200)
    small = {"SELFHEAL_COLLECT_SNAPSHOT_CHUNK_BYTES": "4096"}  # several chunks
    with TopicReader(sandbox, SNAPSHOTS) as reader, \
            Collector(sandbox, ["snapshots", "--once"], small) as once:
        assert once.proc.wait(timeout=120) == 0, once.text()
        (message, *_) = reader.wait_for(snapshots, what="snapshot")
    assert len(reader.messages) > 2, once.text()
    snapshot = parse_snapshot(message.value)
    assert message.key == sandbox.cluster_id.encode()  # the manifest's key
    assert [m.key for m in reader.messages] == [
        *(f"{sandbox.cluster_id}/chunk/{seq}".encode()
          for seq in range(len(reader.messages) - 1)), sandbox.cluster_id.encode()]
    assert snapshot.cluster_id == sandbox.cluster_id
    with kafka_admin(sandbox) as admin:
        topics = admin.describe_topics()
        replies = {b.node_id: admin.describe_log_dirs(brokers=[b.node_id])[0]
                   for b in sandbox.brokers}
    assert {p.name for p in snapshot.partitions} == {
        f"{t['name']}-{p['partition_index']}" for t in topics for p in t["partitions"]}
    where = {
        (name, partition, broker): (log_dir, size)
        for broker, reply in replies.items()
        for name in {t["name"] for t in topics}
        for log_dir, partitions in placement(reply, name).items()
        for partition, size in partitions.items()
    }
    for p in snapshot.partitions:
        for r in p.replicas:
            log_dir, size = where[(p.topic, p.partition, r.broker)]
            assert r.log_dir == log_dir, (p.name, r.broker)
            if p.topic == topic:  # written before the snapshot, idle since
                assert r.size_bytes == size
    assert sum(r.size_bytes for p in snapshot.partitions if p.topic == topic
               for r in p.replicas) > 0
    assert {(b.id, b.rack, b.alive) for b in snapshot.brokers} == {
        (b.node_id, b.rack, True) for b in sandbox.brokers}
    assert {(b.id, d.path, d.online) for b in snapshot.brokers for d in b.log_dirs} == {
        (b.node_id, d, True) for b in sandbox.brokers for d in b.log_dirs}


def test_a_log_dir_event_triggers_a_snapshot(sandbox):
    with TopicReader(sandbox, SNAPSHOTS) as reader, _started(sandbox, QUIET) as collector:
        reader.wait_for(snapshots, what="start-up snapshot")
        mark = len(snapshots(reader.messages))
        sent = _send_events(sandbox, [_failure(sandbox.cluster_id, 1)])
        (message, *_) = reader.wait_for(lambda ms: snapshots(ms)[mark:],
                                        what="triggered snapshot")
        print(f"log-dir event acked -> snapshot read: {message.arrived - sent:.2f} s")
        collector.wait_for_line(r"snapshot \(log_dir_failure broker 1 \(zookeeper\)\)")
        assert collector.stop() == 0, collector.text()
    parse_snapshot(message.value)


def test_a_burst_of_events_makes_one_snapshot_and_other_clusters_events_none(sandbox):
    env = {"SELFHEAL_COLLECT_EVENT_COALESCE_SECONDS": "1.0"}
    with TopicReader(sandbox, SNAPSHOTS) as reader, \
            _started(sandbox, QUIET, env) as collector:
        reader.wait_for(snapshots, what="start-up snapshot")
        mark = len(snapshots(reader.messages))
        burst = [_failure("some-other-cluster", 0)] + [
            _failure(sandbox.cluster_id, b.node_id) for b in sandbox.brokers]
        _send_events(sandbox, burst)
        reader.wait_for(lambda ms: snapshots(ms)[mark:], what="triggered snapshot")
        line = collector.wait_for_line(r"snapshot \(log_dir_failure broker")
        time.sleep(3)  # room for a second snapshot, which must not come
        assert len(snapshots(reader.messages)) == mark + 1, collector.text()
        assert collector.stop() == 0, collector.text()
    # three events of this cluster, one snapshot; the other cluster's event is not counted
    assert re.search(r"log_dir_failure broker \d \(zookeeper\) and 2 more\)", line), line


def _offline(snapshot: Snapshot, broker: int, path: str) -> bool:
    return any(b.id == broker and d.path == path and not d.online
               for b in snapshot.brokers for d in b.log_dirs)


def test_kraft_a_failed_dir_is_an_event_and_a_snapshot_with_the_dir_offline(kraft_sandbox):
    state = kraft_sandbox
    topic = "collect-snapshot-kraft"
    traffic.create_topic(state, topic, partitions=1, replication_factor=3)
    traffic.produce(state, topic, 50)
    broker = state.brokers[2].node_id
    path = traffic.log_dir_of(state, topic, 0, broker)
    with TopicReader(state, SNAPSHOTS) as snaps, TopicReader(state, EVENTS) as events, \
            _started(state, ["--interval", "600", "--probe-interval", "1"]) as collector:
        cluster.fail_disk(state, broker, path)
        try:
            traffic.produce(state, topic, 20)  # the broker notices on its next write
            (event, *_) = events.wait_for(lambda ms: [
                e for e in map(LogDirEvent.from_json, (m.value for m in ms))
                if e.kind == "log_dir_failure"], what="log_dir_failure event")
            (snapshot, *_) = snaps.wait_for(lambda ms: [
                s for s in _snapshots(ms) if _offline(s, broker, path)],
                what=f"snapshot with {path} offline")
            records = list(snaps.messages)
        finally:
            cluster.heal_disk(state, broker, path)
        assert collector.stop() == 0, collector.text()
    # The failure's own evidence went first: a delta for that broker alone, with the dir
    # offline, ahead of the full snapshot saying the same, and based on the start-up one.
    deltas = [(i, check_delta(m.value)) for i, m in enumerate(records)
              if kind_of(m.value) == DELTA]
    (delta, *_) = [(i, d) for i, d in deltas
                   if not d.dirs().get(broker, (True, {}))[1].get(path, True)]
    full = next(i for i, m in enumerate(records) if kind_of(m.value) == MANIFEST
                and _offline(parse_snapshot(snapshots(records[:i + 1])[-1].value),
                             broker, path))
    assert delta[0] < full and delta[1].broker_ids() == {broker}
    assert delta[1].base_taken_at is not None and delta[1].reason == "the probe saw a change"
    assert {p.topic for p in delta[1].partitions} >= {topic}
    assert (event.source, event.broker, event.log_dir, event.details) == (
        "describe_log_dirs", broker, path, "KAFKA_STORAGE_ERROR")
    assert event.cluster_id == state.cluster_id
    # the replica on the failed dir keeps its last known dir (PlacementMemory)
    (partition,) = [p for p in snapshot.partitions if p.topic == topic]
    assert {r.broker: r.log_dir for r in partition.replicas}[broker] == path


def test_kraft_brokers_leaving_and_joining_are_metadata_events(kraft_sandbox):
    state = kraft_sandbox
    broker = state.brokers[0].node_id
    with TopicReader(state, EVENTS) as events, \
            _started(state, ["--interval", "600", "--probe-interval", "1"]) as collector:
        cluster.kill_broker(state, broker, graceful=True)
        try:
            events.wait_for(lambda ms: ms, what="broker_deregistered")
        finally:
            cluster.start_broker(state, broker)
        events.wait_for(lambda ms: len(ms) >= 2, what="broker_registered")
        assert collector.stop() == 0, collector.text()
    seen = [LogDirEvent.from_json(m.value) for m in events.messages]
    assert [(e.kind, e.broker, e.source) for e in seen] == [
        ("broker_deregistered", broker, "metadata"), ("broker_registered", broker, "metadata")]


def test_a_snapshot_file_for_the_planners_needs_no_bus(sandbox, tmp_path):
    from tests.conftest import SELFHEAL, run_cli

    out = tmp_path / "snapshot.json"
    done = run_cli(["collect", "snapshots", "--out", str(out)], sandbox, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"-> {out}" in done.stderr and done.stdout == ""
    snapshot = parse_snapshot(out.read_bytes())
    assert snapshot.cluster_id == sandbox.cluster_id
    assert {b.id for b in snapshot.brokers} == {b.node_id for b in sandbox.brokers}
    assert not list(tmp_path.glob(".*.partial"))
    plan = run_cli(["plan", "offline", "--snapshot", str(out)], sandbox)
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["version"] == 1

    # '-' writes to stdout, the way a pipe into `selfheal plan ... --snapshot -` reads it
    env = {**os.environ, "SELFHEAL_SANDBOX_DIR": sandbox.work_dir}
    piped = subprocess.run(SELFHEAL + ["collect", "snapshots", "--out", "-"],
                           capture_output=True, env=env, timeout=120)
    assert piped.returncode == 0, piped.stderr
    disks = subprocess.run(SELFHEAL + ["plan", "disks", "--snapshot", "-"], input=piped.stdout,
                           capture_output=True, env=env, timeout=120)
    assert disks.returncode == 0, disks.stderr


def test_a_snapshot_file_into_a_missing_directory_is_refused_before_reading(tmp_path):
    from tests.conftest import run_cli

    done = run_cli(["collect", "snapshots", "--out", str(tmp_path / "no" / "such.json")])
    assert done.returncode == 2
    assert f"no directory {tmp_path / 'no'}; create it" in done.stderr


def test_the_events_reader_waits_for_its_topic_created_a_moment_later(sandbox):
    # The collector creates the bus topics and then reads the events topic from its end;
    # a broker may not know a topic that new yet (a full run's collector logged
    # UNKNOWN_TOPIC_OR_PART here and retried). Created 2 s late, it is waited for.
    from streams.collect.snapshots import _events_consumer

    topic = f"late-events-{os.urandom(3).hex()}"
    run = types.SimpleNamespace(config=sandbox_config(sandbox))
    creator = threading.Timer(2.0, traffic.create_topic, (sandbox, topic, 3, 2))
    creator.start()
    events = _events_consumer(run, topic)
    try:
        creator.join()
        assert sorted((tp.partition, tp.offset) for tp in events.assignment()) == [
            (0, 0), (1, 0), (2, 0)]
        written = traffic.produce(sandbox, topic, 3, prefix="late")
        read: list[str] = []
        deadline = time.monotonic() + 60
        while len(read) < len(written) and time.monotonic() < deadline:
            read += [m.value().decode() for m in events.consume(10, timeout=0.5)
                     if m.error() is None]
        assert sorted(read) == sorted(written)
    finally:
        events.close()
        traffic.delete_topic(sandbox, topic)


def test_an_events_topic_that_never_comes_is_named_with_the_brokers_answer(sandbox):
    from core.bus import BusError, consumer, end_offsets

    reader = consumer(sandbox_config(sandbox), "unused")
    try:
        with pytest.raises(BusError) as refused:
            end_offsets(reader, "never-created", 2.0)
    finally:
        reader.close()
    assert str(refused.value).startswith(
        "topic never-created not readable on the bus after 2 s: UNKNOWN_TOPIC_OR_PART")
    assert "Exception" not in str(refused.value)
