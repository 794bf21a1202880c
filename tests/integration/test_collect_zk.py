"""`selfheal collect zk` against the sandbox's real ZooKeeper and brokers."""

from __future__ import annotations

import pytest

from sandbox import cluster, traffic
from schemas.records import LogDirEvent
from tests.integration.collect_support import Collector, TopicReader, sample_value

pytestmark = pytest.mark.integration

TOPIC = "selfheal.logdir-events"


def _events(messages) -> list[LogDirEvent]:
    return [LogDirEvent.from_json(m.value) for m in messages]  # each one validates


def _kinds(messages, kind: str) -> list[LogDirEvent]:
    return [e for e in _events(messages) if e.kind == kind]


def _watching(state) -> Collector:
    collector = Collector(state, ["zk"])
    try:
        collector.wait_for_line(r"watching /log_dir_event_notification and /brokers/ids")
    except BaseException:
        collector.stop()
        raise
    return collector


def _fail_and_expect_event(state, reader: TopicReader, topic: str, broker: int) -> str:
    """Fail the dir of ``broker`` holding ``topic``-0, write to it; the event it gave."""
    path = traffic.log_dir_of(state, topic, 0, broker)
    mark = len(reader.messages)
    cluster.fail_disk(state, broker, path)
    traffic.produce(state, topic, 20)  # the broker notices on its next write
    (event, *_) = reader.wait_for(
        lambda ms: _kinds(ms[mark:], "log_dir_failure"), what="log_dir_failure event")
    assert (event.source, event.cluster_id) == ("zookeeper", state.cluster_id)
    # The controller deletes the notification at once: the watcher may read it whole, see
    # only its name (data gone), or only the parent's cversion advance (name gone too).
    if event.znode is not None:
        assert event.znode.startswith("/log_dir_event_notification/log_dir_event_")
        assert event.broker in (broker, None)
    else:
        assert event.broker is None
        assert "cversion" in event.details
    return path


def test_a_failed_dir_gives_a_log_dir_failure_event(sandbox):
    topic = "collect-zk-fail"
    traffic.create_topic(sandbox, topic, partitions=1, replication_factor=3)
    broker = sandbox.brokers[0].node_id
    with TopicReader(sandbox, TOPIC) as reader, _watching(sandbox) as collector:
        path = _fail_and_expect_event(sandbox, reader, topic, broker)
        cluster.heal_disk(sandbox, broker, path)
        assert collector.stop() == 0, collector.text()
    assert "producer flushed" in collector.text()


def test_a_broker_leaving_and_coming_back_gives_both_events(sandbox):
    broker = sandbox.brokers[2].node_id
    with TopicReader(sandbox, TOPIC) as reader, _watching(sandbox) as collector:
        cluster.kill_broker(sandbox, broker, graceful=True)
        try:
            gone = reader.wait_for(lambda ms: _kinds(ms, "broker_deregistered"),
                                   what="broker_deregistered")
        finally:
            cluster.start_broker(sandbox, broker)
        back = reader.wait_for(lambda ms: _kinds(ms, "broker_registered"),
                               what="broker_registered")
        assert collector.stop() == 0, collector.text()
    assert [(e.broker, e.znode) for e in gone] == [(broker, f"/brokers/ids/{broker}")]
    assert [e.broker for e in back] == [broker]
    keys = {m.key for m in reader.messages}
    assert keys == {f"{sandbox.cluster_id}/{broker}".encode()}


def test_the_watcher_recovers_from_a_zookeeper_restart_and_reports_the_next_failure(sandbox):
    topic = "collect-zk-restart"
    traffic.create_topic(sandbox, topic, partitions=1, replication_factor=3)
    broker = sandbox.brokers[1].node_id
    with TopicReader(sandbox, TOPIC) as reader, _watching(sandbox) as collector:
        cluster.stop_zookeeper(sandbox)
        try:
            collector.wait_for_line(r"ERROR ZooKeeper connection lost")
        finally:
            cluster.start_zookeeper(sandbox)
        collector.wait_for_line(r"reconnected to ZooKeeper")
        cluster.wait_ready(sandbox)
        path = _fail_and_expect_event(sandbox, reader, topic, broker)
        cluster.heal_disk(sandbox, broker, path)
        metrics_text = collector.own_metrics()
        assert collector.stop() == 0, collector.text()
    assert sample_value(metrics_text, "selfheal_collect_errors_total", reason="zk_suspended") >= 1


def test_once_reports_the_registered_brokers_and_exits_0(sandbox):
    with TopicReader(sandbox, TOPIC) as reader, Collector(sandbox, ["zk", "--once"]) as once:
        assert once.proc.wait(timeout=120) == 0, once.text()
        reader.wait_for(lambda ms: len(_kinds(ms, "broker_registered")) >= 3,
                        what="a registration per broker")
    events = _kinds(reader.messages, "broker_registered")
    assert sorted(e.broker for e in events) == sorted(b.node_id for b in sandbox.brokers)
