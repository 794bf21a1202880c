"""`selfheal stream` on the real sandbox: records produced to its input topics with
confluent-kafka (the collectors are tested elsewhere), actions and dead letters read back.

One job process serves the whole module (a Spark start costs 10-20 s); it is restarted
once, from its checkpoint, to show that a restart and a replay propose nothing twice.
Each scenario uses its own cluster id, so the detector's per-cluster state never mixes.
Topics get a prefix of their own, so nothing else on the sandbox reaches this job.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core import clock
from core.live import PlacementMemory
from core.plan.disks import broker_usage, mean_ratio, over_limit
from sandbox import cluster, traffic
from sandbox.status import KAFKA_STORAGE_ERROR, log_dir_errors
from schemas.registry import dumps, validate
from schemas.snapshot import snapshot_from_dict
from tests.integration.stream_job_support import (
    FAST_SAMPLES,
    SKEW_WINDOW,
    Bus,
    awaited,
    cid,
    dirs_holding,
    gauge,
    live_snapshot,
    logdir_event,
    named,
    on_dir,
    running_stream,
    skewed,
    snapshot_with_dir_on,
    taken_later,
)
from tests.integration.test_log_dir_failure import scrape
from tests.polling import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stream(sandbox, tmp_path_factory):
    """The running job and the bus, on topics of their own."""
    # Leader balance on the sandbox is not what these tests are about.
    yield from running_stream(sandbox, tmp_path_factory.mktemp("stream-job"), "st", {
        "skew_window_seconds": SKEW_WINDOW, "leader_window_seconds": 86400.0})


@pytest.fixture(scope="module")
def movable(sandbox) -> str:
    """A topic of RF 2 on the 3 brokers: a failed dir's replicas of it can move (the bus
    topics have RF 3: nowhere to go, so only a page)."""
    topic = f"stream-movable-{uuid.uuid4().hex[:6]}"
    traffic.create_topic(sandbox, topic, partitions=6, replication_factor=2)
    return topic


def test_a_real_dir_failure_is_proposed_once_even_after_a_restart_and_a_replay(
        sandbox, stream, movable):
    job, bus = stream
    cluster_id = cid("zk")
    memory = PlacementMemory()
    before, (broker, path) = snapshot_with_dir_on(sandbox, cluster_id, memory, movable, 1)
    bus.send("cluster-snapshots", before, cluster_id.encode())
    try:
        cluster.fail_disk(sandbox, broker, path)
        traffic.produce(sandbox, movable, 12)  # a write makes the broker notice at once
        wait_until(lambda: log_dir_errors(sandbox, [broker]).get(broker, {}).get(path)
                   == KAFKA_STORAGE_ERROR, f"broker {broker} noticing its failed dir", 60)
        # What the collectors send: the notification (its data already gone, then read),
        # and the snapshot they take at once.
        noticed = datetime.now(UTC)
        events = [logdir_event(cluster_id, noticed),
                  logdir_event(cluster_id, noticed + timedelta(milliseconds=200), broker)]
        for event in events:
            bus.send("logdir-events", event)
        after = live_snapshot(sandbox, cluster_id, memory)
        assert any(not d["online"] for b in after["brokers"] if b["id"] == broker
                   for d in b["log_dirs"])
        bus.send("cluster-snapshots", after, cluster_id.encode())

        (fix,) = awaited(job, lambda: bus.actions(cluster_id, "fix_offline_replicas"), "fix")
        arrived = datetime.now(UTC)
        validate("action", fix)
        assert fix["trigger"] == {"kind": "logdir_event", "broker": broker, "log_dir": path}
        assert fix["event_time"] == clock.text(noticed)
        assert named(fix) == on_dir(before, broker, path) and fix["plan"]["partitions"]
        for target in fix["plan"]["partitions"]:
            assert broker not in target["replicas"]
        print(f"\nevent -> action on the bus: {(arrived - noticed).total_seconds():.2f} s "
              f"(action created {fix['created_at']}, event {fix['event_time']})")

        # The same failure again, from the gauge and later snapshots: nothing new.
        bus.send("broker-metrics", gauge(cluster_id, broker, path, 1))
        bus.send("cluster-snapshots", live_snapshot(sandbox, cluster_id, memory),
                 cluster_id.encode())
        bus.settle()
        assert len(bus.actions(cluster_id, "fix_offline_replicas")) == 1

        # Restart from the checkpoint, and replay what was sent.
        assert job.stop() == 0
        assert any(x.endswith("[stream] stopped") for x in job.lines)
        job.start(fresh=False)
        for event in events:
            bus.send("logdir-events", event)
        bus.send("cluster-snapshots", after, cluster_id.encode())
        bus.settle()
        fixes = bus.actions(cluster_id, "fix_offline_replicas")
        assert [a["action_id"] for a in fixes] == [fix["action_id"]]
        # Spark's logs went through the raw local file system (streams/job.py
        # LOCAL_CHECKPOINT): no checksum files, and the restart resumed from them.
        checkpoint = Path(re.search(r"checkpoint (\S+), ", job.wait_for("running:", 5))[1])
        for log in ("offsets", "commits"):
            names = [p.name for p in (checkpoint / log).iterdir()]
            assert any(n.isdigit() for n in names) and not [n for n in names
                                                            if n.endswith(".crc")], names
    finally:
        if cluster.disk_failed(path):
            cluster.heal_disk(sandbox, broker, path)
            sandbox.reload()


def test_the_gauge_alone_and_a_kraft_event_alone_each_propose_the_fix(sandbox, stream,
                                                                      movable):
    job, bus = stream
    by_gauge, by_event = cid("gauge"), cid("kraft")
    snapshot = live_snapshot(sandbox, by_gauge)
    (b1, d1), (b2, d2) = dirs_holding(snapshot, movable)[:2]
    bus.send("cluster-snapshots", snapshot, by_gauge.encode())
    bus.send("cluster-snapshots", {**snapshot, "cluster_id": by_event}, by_event.encode())
    when = datetime.now(UTC)
    bus.send("broker-metrics", gauge(by_gauge, b1, d1, 0, when - timedelta(seconds=10)))
    bus.send("broker-metrics", gauge(by_gauge, b1, d1, 1, when))
    # The KRaft probe's event and the snapshot it takes at once.
    bus.send("logdir-events", logdir_event(by_event, when, b2, d2, "describe_log_dirs"))
    bus.send("cluster-snapshots", {**taken_later(snapshot, when + timedelta(seconds=0.3),
                                                 {(b2, d2)}), "cluster_id": by_event},
             by_event.encode())
    # No snapshot newer than the gauge: the gauge goes on reading 1, and after the wait
    # for a fresh one (15 s of event time by default) the older snapshot is planned from.
    bus.settle()
    assert bus.actions(by_gauge, "fix_offline_replicas") == []
    bus.send("broker-metrics", gauge(by_gauge, b1, d1, 1, when + timedelta(seconds=16)))
    (fix,) = awaited(job, lambda: bus.actions(by_gauge, "fix_offline_replicas"), "gauge fix")
    assert fix["trigger"] == {"kind": "metric", "broker": b1, "log_dir": d1}
    assert fix["event_time"] == clock.text(when)
    assert named(fix) == on_dir(snapshot, b1, d1)
    (fix,) = awaited(job, lambda: bus.actions(by_event, "fix_offline_replicas"), "event fix")
    assert fix["trigger"] == {"kind": "logdir_event", "broker": b2, "log_dir": d2}
    assert named(fix) == on_dir(snapshot, b2, d2)


def test_skew_that_lasts_the_window_proposes_moves_that_even_the_broker_out(sandbox, stream):
    job, bus = stream
    cluster_id = cid("skew")
    base = live_snapshot(sandbox, cluster_id)
    path = sandbox.broker(0).log_dirs[0]
    assert len(on_dir(base, 0, path)) >= 4, "too few replicas on the dir to make skew"
    start = datetime.now(UTC)
    bus.send("cluster-snapshots", skewed(base, 0, path, start), cluster_id.encode())
    bus.send("cluster-snapshots",
             skewed(base, 0, path, start + timedelta(seconds=SKEW_WINDOW / 2)),
             cluster_id.encode())
    bus.settle()
    assert bus.actions(cluster_id) == []  # not yet: the skew has not lasted the window
    last = skewed(base, 0, path, start + timedelta(seconds=SKEW_WINDOW + 1))
    bus.send("cluster-snapshots", last, cluster_id.encode())
    (move,) = awaited(job, lambda: bus.actions(cluster_id, "move_replica_dirs"), "move")
    assert move["trigger"]["broker"] == 0
    moved = copy.deepcopy(last)
    targets = {(p["topic"], p["partition"]): p for p in move["plan"]["partitions"]}
    for p in moved["partitions"]:
        target = targets.get((p["topic"], p["partition"]))
        for r, new in zip(p["replicas"], target["log_dirs"] if target else (), strict=False):
            if r["broker"] == 0:
                r["log_dir"] = new
    from core.model import ClusterModel

    dirs = broker_usage(ClusterModel(snapshot_from_dict(moved)), 0)
    mean = mean_ratio(dirs)
    assert not any(over_limit(d.used, 1.10 * mean * d.capacity) for d in dirs)


def test_bad_records_on_every_topic_become_dead_letters_and_detection_goes_on(
        sandbox, stream, movable):
    job, bus = stream
    cluster_id = cid("after-garbage")
    good_metric = gauge(cluster_id, 1, "/d", 0)
    size = {**good_metric, "metric": "kafka_log_size", "labels": {"topic": "t", "partition": "0"},
            "value": 4096.0}
    bad = {
        "broker-metrics": [b"\x00\xffnot json", {**good_metric, "broker": "one"},
                           {k: v for k, v in good_metric.items() if k != "value"},
                           # in the canonical form of a size sample, but no such day:
                           # the fast path must leave it to the suite
                           dumps({**size, "event_time": "2026-02-30T00:00:00.000Z"})],
        "logdir-events": [b"{truncated", {**logdir_event(cluster_id, datetime.now(UTC)),
                                          "kind": "disk_on_fire"}, {"version": 1}],
        "cluster-snapshots": [b"\xc3\x28", {"version": 1, "cluster_id": cluster_id},
                              {**live_snapshot(sandbox, cluster_id), "brokers": "none"}],
    }
    # The snapshot topic is compacted: Kafka refuses records without a key there.
    sent = [(topic, bus.send(topic, value, cluster_id.encode()))
            for topic, values in bad.items() for value in values]
    # Good size samples as the collectors write them: they take the fast path, silently.
    fine = [bus.send("broker-metrics", dumps({**size, "value": float(n)}))
            for n in range(FAST_SAMPLES)]
    letters = awaited(job, lambda: [bus.dead_letter_at(t, w) for t, w in sent]
                      if all(bus.dead_letter_at(t, w) for t, w in sent) else None,
                      "dead letter for every bad record")
    for letter in letters:
        validate("dead-letter", letter)
        assert letter["reason"] and "[expect_" in letter["reason"]
    reasons = [letter["reason"] for letter in letters]
    assert reasons[0].startswith("$: not UTF-8 text") or reasons[0].startswith("$: not JSON")
    assert reasons[1].startswith("broker: expected integer, got string")
    assert reasons[2].startswith("value: required field is missing")
    assert reasons[3].startswith("event_time: expected date-time, got string")
    assert "kind: 'disk_on_fire' is not one of" in reasons[5]
    assert reasons[9].startswith("brokers: expected array, got string")
    assert letters[0]["raw"] == "\x00\ufffdnot json"
    bus.settle()
    assert not any(bus.dead_letter_at("broker-metrics", w) for w in fine)

    # ... and the job still detects the next failure.
    snapshot = live_snapshot(sandbox, cluster_id)
    bus.send("cluster-snapshots", snapshot, cluster_id.encode())
    broker, path = dirs_holding(snapshot, movable)[-1]
    when = datetime.now(UTC)
    bus.send("broker-metrics", gauge(cluster_id, broker, path, 1, when))
    bus.send("cluster-snapshots", taken_later(snapshot, when + timedelta(seconds=0.5),
                                              {(broker, path)}), cluster_id.encode())
    (fix,) = awaited(job, lambda: bus.actions(cluster_id, "fix_offline_replicas"),
                     "fix after garbage")
    assert named(fix) == on_dir(snapshot, broker, path)


def test_every_dir_of_a_broker_offline_pages_the_operator(sandbox, stream):
    job, bus = stream
    cluster_id = cid("page")
    snapshot = live_snapshot(sandbox, cluster_id)
    bus.send("cluster-snapshots", snapshot, cluster_id.encode())
    dirs = sandbox.broker(2).log_dirs
    when = datetime.now(UTC)
    for path in dirs:
        bus.send("broker-metrics", gauge(cluster_id, 2, path, 1, when))
    bus.send("cluster-snapshots", taken_later(snapshot, when + timedelta(seconds=0.5),
                                              {(2, d) for d in dirs}), cluster_id.encode())
    (page,) = awaited(job, lambda: [a for a in bus.actions(cluster_id, "page_operator")
                                    if "every log dir" in a["reason"]], "page")
    assert page["plan"]["brokers"] == [2] and page["plan"]["log_dirs"] == sorted(dirs)
    fixes = awaited(job, lambda: bus.actions(cluster_id, "fix_offline_replicas"), "fixes", 30)
    assert {f["trigger"]["log_dir"] for f in fixes} <= set(dirs)


def test_the_metrics_endpoint_counts_what_the_job_did(stream):
    job, bus = stream
    bus.settle()
    samples = scrape(job.metrics_url)
    letters_topic = bus.config.topic("broker-metrics")
    assert samples[("selfheal_stream_dead_letters_total", (("topic", letters_topic),))] >= 1
    assert samples[("selfheal_stream_actions_total", (("type", "fix_offline_replicas"),))] >= 1
    assert samples[("selfheal_stream_detection_latency_seconds_count",
                    (("type", "fix_offline_replicas"),))] >= 1
    assert samples[("selfheal_stream_input_rows_total", ())] > 0
    assert samples[("selfheal_stream_fast_path_rows_total", ())] >= FAST_SAMPLES
    assert samples[("selfheal_stream_batch_duration_seconds_count", ())] > 0
    assert any("[stream] batch " in x and " rows, " in x for x in job.lines)


def test_spark_reads_an_action_plan_back_as_its_raw_json_text(sandbox, stream, local_spark):
    """schemas/spark.py types the free-form plan as a string: from_json must keep it whole."""
    from pyspark.sql import functions as F

    from schemas.spark import struct_type

    _, bus = stream
    written = {a["action_id"]: a["plan"] for t, a in list(bus.out)
               if t == bus.config.topic("actions")}
    assert written
    rows = (local_spark.read.format("kafka")
            .option("kafka.bootstrap.servers", sandbox.bootstrap_servers)
            .option("subscribe", bus.config.topic("actions"))
            .option("startingOffsets", "earliest").option("endingOffsets", "latest")
            .load()
            .select(F.from_json(F.col("value").cast("string"), struct_type("action"))
                    .alias("a"))
            .select("a.action_id", "a.plan").collect())
    checked = [r for r in rows if r.action_id in written]
    assert checked
    for r in checked:
        assert isinstance(r.plan, str) and json.loads(r.plan) == written[r.action_id]


def test_the_jvm_fast_path_decides_as_its_python_twin(local_spark):
    """Java's regular expressions and UTF-8 check read the pattern as Python's do."""
    from streams.prescreen import fast_path, is_fast

    good = dumps({"version": 1, "cluster_id": "c", "event_time": "2026-11-22T03:50:54.123Z",
                  "broker": 1, "rack": None, "metric": "kafka_log_size",
                  "labels": {"topic": "t", "partition": "0"}, "value": 1048576.0})
    cases = [good, good + b"\n", good + b"\r", good + "\u2028".encode(), None,
             good.replace(b"11-22", b"02-30"), good.replace(b"2026-11-22", b"2024-02-29"),
             good.replace(b"2026-11-22", b"2100-02-29"), good.replace(b"2026-11-22", b"2000-02-29"),
             good.replace(b'"c"', b'"\xffc"'), good.replace(b'"c"', b'"c\x01"'),
             good.replace(b'"t"', '"é中"'.encode()), good.replace(b"1048576.0", b"1e6"),
             good.replace(b'"rack":null', b'"rack":"r1"'), good.replace(b"size", b"sizes")]
    frame = local_spark.createDataFrame([("m", c) for c in cases], "topic string, value binary")
    decided = [r.fast for r in frame.select(fast_path("m").alias("fast")).collect()]
    assert decided == [is_fast(c) for c in cases]
    assert decided[0] and decided[6] and decided[8] and decided[11] and decided[13]


def test_a_batch_that_cannot_deliver_fails_the_query_which_starts_again_and_delivers_once(
        sandbox, stream, movable):
    """The actions topic deleted under the job (the brokers create no topic by
    themselves): the batch holding a fix cannot deliver it within 30 s and fails, and
    with it the query (Spark's local master retries no task). The job starts the query
    again from its checkpoint; once the topic is back the batch runs again and the fix
    reaches the bus, once. Last in the module: the topic it deletes held what the tests
    above read back."""
    from core.bus import ensure_topics

    job, bus = stream
    cluster_id = cid("redo")
    snapshot = live_snapshot(sandbox, cluster_id)
    (broker, path) = dirs_holding(snapshot, movable)[0]
    bus.send("cluster-snapshots", snapshot, cluster_id.encode())
    bus.settle()
    traffic.delete_topic(sandbox, bus.config.topic("actions"))
    when = datetime.now(UTC)
    bus.send("logdir-events", logdir_event(cluster_id, when, broker, path,
                                           "describe_log_dirs"))
    bus.send("cluster-snapshots", taken_later(snapshot, when + timedelta(seconds=0.3),
                                              {(broker, path)}), cluster_id.encode())
    failed = job.wait_for("starts again from its checkpoint", 120)
    # librdkafka refuses the record at produce() once it knows the topic is gone ("Unknown
    # topic", run N), fails its delivery ("Unknown partition"), or still waits for the
    # topic when the 30 s flush ends: each time the batch body says the bus did not take it.
    assert re.search(r"Unknown topic|not delivered to the bus", failed), failed
    assert "restart 1 of 5 in a row" in failed, failed
    ensure_topics(bus.config)  # the operator puts it back
    # The module's reader lost the deleted topic: the new one is read from its start.
    again = Bus(bus.config)
    try:
        (fix,) = awaited(job, lambda: again.actions(cluster_id, "fix_offline_replicas"),
                         "the fix, after the restart", 180)
        assert fix["trigger"] == {"kind": "logdir_event", "broker": broker, "log_dir": path}
        again.settle()  # later batches ran: still one
        assert [a["action_id"] for a in again.actions(cluster_id)
                if a["type"] == "fix_offline_replicas"] == [fix["action_id"]]
    finally:
        again.close()
    assert job.proc is not None and job.proc.poll() is None
    assert scrape(job.metrics_url)[("selfheal_stream_query_restarts_total", ())] == 1
