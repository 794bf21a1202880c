"""A topic the bus stops listing, on the real sandbox: librdkafka then refuses records for
it inside produce() (`_UNKNOWN_TOPIC`), as it did for a metrics collector when the bus came
back from an outage and a restarted broker answered before it knew its topics. The
collector's sink keeps such a record for another try; nothing is raised and nothing lost."""

from __future__ import annotations

import time
import uuid

import pytest

from core import bus
from core.config import load as load_config
from sandbox import traffic
from streams.collect.sink import RecordSink
from streams.collect.telemetry import Telemetry

pytestmark = pytest.mark.integration


def test_records_for_a_topic_the_bus_stopped_listing_wait_and_arrive_once_it_is_back(
        sandbox, monkeypatch):
    real = bus.producer
    # librdkafka holds records for a topic it has known for less than this grace (30 s by
    # default) instead of refusing them: a collector that has run a while has no grace.
    monkeypatch.setattr(bus, "producer", lambda config, **kw: real(
        config, **{"topic.metadata.propagation.max.ms": 0, **kw}))
    config = load_config(path=None, env={"SELFHEAL_SANDBOX_DIR": sandbox.work_dir})
    topic = f"refusals-{uuid.uuid4().hex[:6]}"
    traffic.create_topic(sandbox, topic, partitions=1, replication_factor=2)
    lines: list[str] = []
    sink = RecordSink(config, Telemetry("test"), lines.append, "test")
    sink.send(topic, b"before", b"k")
    assert sink.flush(30.0) == 0

    traffic.delete_topic(sandbox, topic)
    # The sink's producer told the topic is gone, as a restarted bus broker tells it: its
    # next produce() refuses on the spot (else the first record would fail on delivery,
    # the other path, depending on when its own metadata refresh came).
    deadline = time.monotonic() + 60
    while sink._producer.list_topics(topic, timeout=5).topics[topic].error is None:
        assert time.monotonic() < deadline, "the bus still lists the deleted topic"
        time.sleep(0.5)
    while sink.pending == 0:  # what produce() refuses on the spot waits in the sink
        assert time.monotonic() < deadline, "produce() never refused the deleted topic"
        sink.send(topic, b"probe", b"k")
        sink.poll(0.2)
    after = [f"after {n}".encode() for n in range(10)]
    for value in after:
        assert sink.send(topic, value, b"k")  # no exception
    assert sink.pending >= len(after)

    _create_again(sandbox, topic)
    assert sink.flush(60.0) == 0
    assert sink.lost == 0
    values = traffic.consume_all(sandbox, topic, expected=len(after), timeout=30)
    assert [v for v in values if v.startswith("after")] == [a.decode() for a in after]
    sink.poll()
    assert any("Unknown topic" in line and "sent again" in line for line in lines), lines
    traffic.delete_topic(sandbox, topic)


def _create_again(state, topic: str) -> None:
    """The same name again; the broker refuses it while the old one is being deleted."""
    deadline = time.monotonic() + 60
    while True:
        try:
            traffic.create_topic(state, topic, partitions=1, replication_factor=2)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
