"""`selfheal collect metrics` against the sandbox's real JMX exporters."""

from __future__ import annotations

import time

import pytest

from sandbox import cluster, processes, traffic
from schemas import wire
from schemas.records import BrokerMetric
from tests.integration.collect_support import Collector, TopicReader, sample_value

pytestmark = pytest.mark.integration

TOPIC = "selfheal.broker-metrics"
OFFLINE = "kafka_log_log_directory_offline"



def brokers_of(messages) -> set[int]:
    """The brokers the broker-metrics records among ``messages`` are from."""
    return {wire.record("broker-metric", m.value)["broker"] for m in messages}

def _records(messages) -> list[tuple[bytes | None, BrokerMetric]]:
    return [(m.key, BrokerMetric.from_json(m.value)) for m in messages]


def _offline_samples(messages) -> dict[tuple[int, str], float]:
    """The latest kafka_log_log_directory_offline value per (broker, dir)."""
    latest = {}
    for m in messages:
        data = wire.record("broker-metric", m.value)
        if data["metric"] == OFFLINE:
            latest[(data["broker"], data["labels"]["log_dir"])] = data["value"]
    return latest


def test_samples_cover_every_broker_and_dir_validate_and_are_keyed_by_broker(sandbox):
    dirs = {(b.node_id, d) for b in sandbox.brokers for d in b.log_dirs}
    with TopicReader(sandbox, TOPIC) as reader, \
            Collector(sandbox, ["metrics", "--interval", "1"]) as collector:
        reader.wait_for(lambda ms: dirs <= set(_offline_samples(ms)), what="sample per dir")
        # counted on the bus's acknowledgement, which may lag the reader by a poll
        collector.wait_for_metric("selfheal_collect_records_produced_total",
                                  lambda v: v > 0, topic=TOPIC, collector="metrics")
        metrics_text = collector.own_metrics()
        assert collector.stop() == 0, collector.text()
        assert "producer flushed" in collector.text()
    records = _records(reader.messages)  # every record parses and validates
    racks = {b.node_id: b.rack for b in sandbox.brokers}
    assert {r.broker for _, r in records} == set(racks)
    for key, record in records:
        assert key == f"{sandbox.cluster_id}/{record.broker}".encode()
        assert record.cluster_id == sandbox.cluster_id
        assert record.rack == racks[record.broker]
    assert all(_offline_samples(reader.messages)[d] == 0.0 for d in dirs)
    assert {r.metric for _, r in records} >= {
        OFFLINE, "kafka_log_offline_log_directory_count", "kafka_log_size"}
    labels = {"collector": "metrics"}
    assert sample_value(metrics_text, "selfheal_collect_scrapes_total",
                        result="ok", **labels) >= 3
    assert sample_value(metrics_text, "selfheal_collect_last_success_timestamp_seconds",
                        **labels) > time.time() - 600


def test_a_failed_dir_reads_1_until_the_disk_is_replaced(sandbox):
    topic = "collect-metrics-fail"
    traffic.create_topic(sandbox, topic, partitions=1, replication_factor=3)
    broker = sandbox.brokers[1].node_id
    path = traffic.log_dir_of(sandbox, topic, 0, broker)
    # The broker is down a while for the heal: a retry of its exporter backed off to the
    # 60 s default could come after this test's wait (backing off has tests of its own).
    env = {"SELFHEAL_COLLECT_BACKOFF_MAX_SECONDS": "4"}
    with TopicReader(sandbox, TOPIC) as reader, \
            Collector(sandbox, ["metrics", "--interval", "1"], env) as collector:
        reader.wait_for(lambda ms: _offline_samples(ms).get((broker, path)) == 0.0,
                        what=f"healthy sample for {path}")
        cluster.fail_disk(sandbox, broker, path)
        try:
            traffic.produce(sandbox, topic, 20)  # the broker notices on its next write
            reader.wait_for(lambda ms: _offline_samples(ms).get((broker, path)) == 1.0,
                            what=f"offline sample for {path}")
            others = {k: v for k, v in _offline_samples(reader.messages).items()
                      if k != (broker, path)}
            assert set(others.values()) == {0.0}
        finally:
            # From before the heal: the broker's exporter may answer (and its healthy
            # sample go, once: change-only publishing) before heal_disk returns.
            mark = len(reader.messages)
            cluster.heal_disk(sandbox, broker, path)
        reader.wait_for(lambda ms: _offline_samples(ms[mark:]).get((broker, path)) == 0.0,
                        what=f"healthy sample for {path} after the disk was replaced")
        assert collector.stop() == 0, collector.text()


def test_a_dead_exporter_is_reported_and_backed_off_while_the_others_are_scraped(sandbox):
    dead = f"http://127.0.0.1:{processes.free_port()}/metrics"
    urls = [f"{b.node_id}={b.exporter_url}" for b in sandbox.brokers] + [f"9={dead}"]
    env = {"SELFHEAL_CLUSTER_EXPORTER_URLS": ",".join(urls),
           "SELFHEAL_COLLECT_BACKOFF_INITIAL_SECONDS": "0.5"}
    with TopicReader(sandbox, TOPIC) as reader, \
            Collector(sandbox, ["metrics", "--interval", "1"], env) as collector:
        first = collector.wait_for_line(rf"ERROR exporter {dead} \(broker 9\)")
        assert "retrying in 0.5 s" in first and "other exporters are still scraped" in first
        collector.wait_for_line(rf"ERROR exporter {dead} .*retrying in 2\.0 s")
        mark = len(reader.messages)  # after three failures, the others still arrive
        live = {b.node_id for b in sandbox.brokers}
        reader.wait_for(lambda ms: brokers_of(ms[mark:]) == live,
                        what="fresh samples from every live broker")
        metrics_text = collector.own_metrics()
        assert collector.stop() == 0, collector.text()
    assert sample_value(metrics_text, "selfheal_collect_target_up", target=dead) == 0.0
    assert sample_value(metrics_text, "selfheal_collect_errors_total",
                        reason="unreachable") >= 3
    assert 9 not in brokers_of(reader.messages)


def test_between_keepalives_only_changed_gauges_go_and_sizes_only_with_whole_scrapes(
        sandbox):
    env = {"SELFHEAL_COLLECT_METRICS_KEEPALIVE_SECONDS": "4"}
    with TopicReader(sandbox, TOPIC) as reader, \
            Collector(sandbox, ["metrics", "--interval", "1"], env) as collector:
        scrapes = collector.wait_for_metric("selfheal_collect_scrapes_total",
                                            lambda v: v >= 30, timeout=120,
                                            collector="metrics", result="ok")
        assert collector.stop() == 0, collector.text()
    rounds: dict[tuple[int, str], list[BrokerMetric]] = {}  # (broker, scrape time)
    for _, record in _records(reader.messages):
        rounds.setdefault((record.broker, record.event_time), []).append(record)
    last: dict[tuple[int, str, tuple], float] = {}
    whole = 0
    for (broker, _), records in sorted(rounds.items(), key=lambda kv: kv[0][1]):
        if any(r.metric == "kafka_log_size" for r in records):
            whole += 1
        else:  # between keepalives: gauges whose value changed, nothing else
            for r in records:
                previous = last.get((broker, r.metric, tuple(sorted(r.labels.items()))))
                assert previous is not None and previous != r.value, r
        for r in records:
            last[(broker, r.metric, tuple(sorted(r.labels.items())))] = r.value
    assert 3 <= whole < scrapes  # the first round whole for each broker, then fewer


def test_once_scrapes_every_exporter_and_exits_0(sandbox):
    with TopicReader(sandbox, TOPIC) as reader, \
            Collector(sandbox, ["metrics", "--once"]) as collector:
        assert collector.proc.wait(timeout=120) == 0, collector.text()
        assert "one round: 3 of 3 exporters scraped" in collector.text()
        reader.wait_for(lambda ms: brokers_of(ms)
                        == {b.node_id for b in sandbox.brokers}, what="every broker")
