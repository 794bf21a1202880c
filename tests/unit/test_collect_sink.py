"""The collectors' producer wrapper refuses an oversized record with the limits to raise."""

from __future__ import annotations

import pytest

from core.bus import MAX_MESSAGE_BYTES
from core.config import load
from streams.collect.sink import RecordSink, RecordTooLarge
from streams.collect.telemetry import Telemetry


def test_a_record_over_the_size_limit_says_which_limits_to_raise(tmp_path):
    # librdkafka checks the size before any connection: no bus is needed to see it
    config = load(env={"SELFHEAL_SANDBOX_DIR": str(tmp_path),
                       "SELFHEAL_CLUSTER_BOOTSTRAP_SERVERS": "127.0.0.1:9"})
    sink = RecordSink(config, Telemetry("test"), lambda _line: None, "test")
    with pytest.raises(RecordTooLarge, match="raise core.bus.MAX_MESSAGE_BYTES"):
        sink.send("selfheal.cluster-snapshots", b"x" * (MAX_MESSAGE_BYTES + 1), b"c1")


class Message:
    def __init__(self, topic: str, value: bytes, key: bytes | None) -> None:
        self._topic, self._value, self._key = topic, value, key

    def topic(self) -> str:
        return self._topic

    def value(self) -> bytes:
        return self._value

    def key(self) -> bytes | None:
        return self._key


class Bus:
    """A producer whose bus refuses every record while ``down`` (as librdkafka does for
    a topic with no leader: "Unknown partition") and keeps what it accepted, in order.
    Deliveries are reported on `answer()` (and on flush), as librdkafka reports them
    some time after the produce call."""

    def __init__(self) -> None:
        self.down = True
        self.queued: list[tuple[Message, object]] = []
        self.accepted: list[bytes] = []

    def produce(self, topic, value, key, on_delivery, headers=None):
        self.queued.append((Message(topic, value, key), on_delivery))

    def poll(self, timeout: float = 0.0) -> int:
        return 0

    def answer(self) -> None:
        from confluent_kafka import KafkaError

        queued, self.queued = self.queued, []
        for msg, callback in queued:
            if self.down:
                callback(KafkaError(KafkaError._UNKNOWN_PARTITION), msg)
            else:
                self.accepted.append(msg.value())
                callback(None, msg)

    def flush(self, timeout: float) -> int:
        self.answer()
        return len(self.queued)


@pytest.fixture
def bus_sink(monkeypatch, tmp_path) -> tuple[Bus, RecordSink, list[str]]:
    from streams.collect import sink as module

    bus = Bus()
    monkeypatch.setattr("core.bus.producer", lambda config, **_: bus)
    monkeypatch.setattr(module, "RETRY_AFTER_SECONDS", 0.0)
    config = load(env={"SELFHEAL_SANDBOX_DIR": str(tmp_path),
                       "SELFHEAL_CLUSTER_BOOTSTRAP_SERVERS": "127.0.0.1:9"})
    lines: list[str] = []
    return bus, RecordSink(config, Telemetry("test"), lines.append, "test"), lines


def test_records_the_bus_refused_are_sent_again_in_order_once_it_is_back(bus_sink):
    bus, sink, lines = bus_sink
    for n in range(3):
        sink.send("selfheal.logdir-events", f"event {n}".encode(), b"c1/0")
    for _ in range(3):  # refused again and again while the bus is away: kept
        bus.answer()
        assert sink.pending == 3 and bus.accepted == [] and sink.lost == 0
        sink.poll()  # produced again
        assert sink.pending == 0 and len(bus.queued) == 3
    bus.answer()
    bus.down = False
    sink.send("selfheal.logdir-events", b"event 3", b"c1/0")  # goes after the earlier ones
    assert sink.flush(5.0) == 0
    assert bus.accepted == [b"event 0", b"event 1", b"event 2", b"event 3"]
    assert sink.failed == 12 and sink.lost == 0
    sink.poll()
    assert any("Unknown partition" in line and "sent again" in line for line in lines)


def test_a_bus_that_stays_away_leaves_the_records_counted_as_undelivered(bus_sink):
    _bus, sink, lines = bus_sink
    sink.send("selfheal.logdir-events", b"event", b"c1/0")
    assert sink.flush(0.3) == 1
    assert any("still undelivered" in line for line in lines)


def test_the_retry_buffer_is_bounded_and_says_what_it_dropped(bus_sink, monkeypatch):
    from streams.collect import sink as module

    bus, sink, lines = bus_sink
    monkeypatch.setattr(module, "RETRY_LIMIT_BYTES", 25)
    for n in range(5):
        sink.send("selfheal.broker-metrics", f"sample {n:02d}".encode(), b"c1/0")  # 9 bytes
    bus.answer()
    assert sink.pending == 2 and sink.lost == 3  # 27 bytes would be over the bound
    bus.down = False
    assert sink.flush(5.0) == 0
    assert bus.accepted == [b"sample 03", b"sample 04"]  # the newest kept
    assert any("retry buffer full" in line for line in lines)


def test_a_record_sent_while_others_wait_for_another_try_goes_after_them(bus_sink,
                                                                         monkeypatch):
    from streams.collect import sink as module

    bus, sink, _lines = bus_sink
    monkeypatch.setattr(module, "RETRY_AFTER_SECONDS", 3600.0)  # not yet time to retry
    sink.send("selfheal.logdir-events", b"deregistered", b"c1/0")
    bus.answer()  # refused
    bus.down = False
    sink.send("selfheal.logdir-events", b"registered", b"c1/0")
    assert bus.queued == [] and sink.pending == 2  # waits behind the refused one
    assert sink.flush(5.0) == 0
    assert bus.accepted == [b"deregistered", b"registered"]


def test_records_refused_on_the_spot_wait_within_the_same_bound(bus_sink, monkeypatch):
    from confluent_kafka import KafkaError, KafkaException

    from streams.collect import sink as module

    bus, sink, lines = bus_sink
    monkeypatch.setattr(module, "RETRY_LIMIT_BYTES", 25)
    unknown = KafkaException(KafkaError(KafkaError._UNKNOWN_TOPIC))

    def refuse(*_args, **_kwargs):
        raise unknown

    bus.produce = refuse  # the bus does not list the topic
    for n in range(5):
        assert sink.send("selfheal.broker-metrics", f"sample {n:02d}".encode(), b"c1/0")
    assert sink.pending == 2 and sink.lost == 3  # the newest kept, as for failed ones
    del bus.produce  # listed again
    bus.down = False
    assert sink.flush(5.0) == 0
    assert bus.accepted == [b"sample 03", b"sample 04"]
    assert any("retry buffer full" in line for line in lines)
