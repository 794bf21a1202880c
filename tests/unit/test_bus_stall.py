"""`core.bus.StallWatch` and the consumer helper's target reader that uses it.

A librdkafka consumer that never fetches again after every broker restarted (#5153)
cannot be brought about on demand, so stand-ins play the consumer: one that stops
delivering while the partition's high watermark says more is there."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaException

from core.bus import StallWatch
from remediation.consumers import targets
from schemas.records import ConsumerAssignment


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Ends:
    """Answers high watermark questions: {partition: (low, high)}; None: the bus is away."""

    def __init__(self, ends: dict[int, tuple[int, int]] | None) -> None:
        self.ends, self.asked = ends, 0

    def get_watermark_offsets(self, tp: Any, timeout: float,
                              cached: bool = False) -> tuple[int, int]:
        self.asked += 1
        if self.ends is None:
            raise KafkaException("all brokers down")
        return self.ends[tp.partition]


def _watch(clock: _Clock) -> StallWatch:
    return StallWatch("t", [0, 1], stall_s=15.0, ask_s=0.01, clock=clock)


def test_a_reader_behind_the_log_for_the_stall_time_is_stalled():
    clock, ends = _Clock(), _Ends({0: (0, 10), 1: (0, 4)})
    watch = _watch(clock)
    at = {0: 7, 1: 4}
    clock.now += 14.9
    assert watch.check(ends, at.get) is None and ends.asked == 0  # not due: nothing asked
    clock.now += 0.2
    stall = watch.check(ends, at.get)
    assert stall is not None and stall.behind == {0: (7, 10)}  # partition 1 is read to its end
    assert str(stall) == "nothing read for 15 s with t-0 at 7 of 10"
    # the replacement gets the whole stall time of its own
    clock.now += 14.0
    assert watch.check(ends, at.get) is None


def test_reading_anything_puts_the_check_off():
    clock, ends = _Clock(), _Ends({0: (0, 10), 1: (0, 10)})
    watch = _watch(clock)
    clock.now += 10
    watch.read()
    clock.now += 10
    assert watch.check(ends, {0: 0, 1: 0}.get) is None and ends.asked == 0


def test_a_reader_at_the_end_is_not_stalled_and_is_asked_once_per_stall_time():
    clock, ends = _Clock(), _Ends({0: (0, 10), 1: (0, 4)})
    watch = _watch(clock)
    clock.now += 20
    assert watch.check(ends, {0: 10, 1: 4}.get) is None and ends.asked == 2
    clock.now += 5
    assert watch.check(ends, {0: 10, 1: 4}.get) is None and ends.asked == 2


def test_a_log_start_past_what_was_read_is_not_a_lag():
    # compaction removed the offsets before the log start: nothing there to read
    clock, ends = _Clock(), _Ends({0: (9, 9), 1: (0, 0)})
    watch = _watch(clock)
    clock.now += 20
    assert watch.check(ends, {0: 0, 1: 0}.get) is None


def test_a_lag_a_new_consumer_met_unchanged_is_not_reported_again():
    # the last offsets of a compacted partition can be gone for good: reported once, then
    # again only when the log has grown
    clock, ends = _Clock(), _Ends({0: (0, 10), 1: (0, 0)})
    watch = _watch(clock)
    clock.now += 20
    assert watch.check(ends, {0: 7, 1: 0}.get) is not None
    clock.now += 20
    assert watch.check(ends, {0: 7, 1: 0}.get) is None
    ends.ends = {0: (0, 11), 1: (0, 0)}
    clock.now += 20
    stall = watch.check(ends, {0: 7, 1: 0}.get)
    assert stall is not None and stall.behind == {0: (7, 11)}


def test_nothing_is_stalled_while_the_bus_cannot_say_what_is_there():
    clock, ends = _Clock(), _Ends(None)
    watch = _watch(clock)
    clock.now += 20
    assert watch.check(ends, {0: 0, 1: 0}.get) is None
    assert ends.asked >= 1  # it asked, and stopped at the first partition it could not ask


# --- the target reader --------------------------------------------------------------------

GROUP, TOPIC = "orders", "selfheal.consumer-assignments"


def _target(partition: int) -> bytes:
    """A target that gives member m1 the one partition ``partition`` of orders."""
    return ConsumerAssignment.from_dict({
        "version": 1, "cluster_id": "c1", "event_time": "2026-11-28T09:00:00Z",
        "group": GROUP, "strategy": "range", "cross_rack": 0,
        "assignment": {"m1": [{"topic": "orders", "partition": partition}]},
    }).to_json()


def _given(target: ConsumerAssignment | None) -> list[int]:
    assert target is not None
    return [a.partition for a in target.assignment["m1"]]


class _Msg:
    def __init__(self, partition: int, offset: int, value: bytes) -> None:
        self._p, self._o, self._v = partition, offset, value

    def error(self) -> None:
        return None

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def key(self) -> bytes:
        return GROUP.encode()

    def value(self) -> bytes:
        return self._v


class _Bus:
    """One partition of the target topic; the first consumer opened stops fetching after
    `serve` records."""

    def __init__(self, records: list[bytes], serve: int) -> None:
        self.records, self.serve = records, serve
        self.opened: list[_Consumer] = []

    def open(self) -> _Consumer:
        c = _Consumer(self, stalls=not self.opened)
        self.opened.append(c)
        return c


class _Consumer:
    def __init__(self, bus: _Bus, stalls: bool) -> None:
        self.bus, self.stalls = bus, stalls
        self.at, self.delivered, self.closed = 0, 0, False
        self.assigned: list[tuple[int, int]] = []

    def list_topics(self, topic: str, timeout: float) -> Any:
        return SimpleNamespace(topics={topic: SimpleNamespace(error=None, partitions={0: None})})

    def assign(self, tps: list[Any]) -> None:
        self.assigned = [(tp.partition, tp.offset) for tp in tps]
        self.at = max(tps[0].offset, 0)  # BEGINNING is -2

    def consume(self, num: int, timeout: float) -> list[_Msg]:
        if self.stalls and self.delivered >= self.bus.serve or self.at >= len(self.bus.records):
            return []
        msg = _Msg(0, self.at, self.bus.records[self.at])
        self.at += 1
        self.delivered += 1
        return [msg]

    def get_watermark_offsets(self, tp: Any, timeout: float,
                              cached: bool = False) -> tuple[int, int]:
        return 0, len(self.bus.records)

    def close(self) -> None:
        self.closed = True


def _reader(monkeypatch: pytest.MonkeyPatch, bus: _Bus, clock: _Clock) -> targets.TargetReader:
    monkeypatch.setattr(targets.TargetReader, "_open", lambda self: bus.open())
    real = targets.StallWatch

    def watch(*args: Any) -> StallWatch:
        return real(*args, clock=clock)

    monkeypatch.setattr(targets, "StallWatch", watch)
    return targets.TargetReader({}, TOPIC, GROUP, cluster_id="c1")


def test_a_stalled_target_reader_is_replaced_and_reads_the_newest_target(monkeypatch, caplog):
    bus, clock = _Bus([_target(1), _target(2)], serve=1), _Clock()
    reader = _reader(monkeypatch, bus, clock)
    first = reader.poll()
    assert _given(first) == [1]
    assert reader.poll() == first  # the second target is on the bus, not read: stalled
    clock.now += targets.TargetReader.STALL_S + 1
    with caplog.at_level(logging.WARNING, logger="selfheal.consumers"):
        assert reader.poll() == first  # the stall is seen, a new consumer takes over
    assert reader.stalls == 1 and len(bus.opened) == 2 and bus.opened[0].closed
    assert bus.opened[1].assigned == [(0, 1)]  # after the last record read, not again
    assert f"{TOPIC}-0 at 1 of 2" in caplog.text and "replacing its consumer" in caplog.text
    assert _given(reader.poll()) == [2] and reader.version == 2


def test_a_target_reader_at_the_end_keeps_its_consumer(monkeypatch):
    bus, clock = _Bus([_target(1)], serve=5), _Clock()
    reader = _reader(monkeypatch, bus, clock)
    assert reader.poll() is not None
    for _ in range(3):
        clock.now += targets.TargetReader.STALL_S + 1
        reader.poll()
    assert reader.stalls == 0 and len(bus.opened) == 1


# --- the snapshot collector's event reader ------------------------------------------------


class _EventsConsumer:
    """Assigned at the end of a 3-partition events topic (`ends`, the bus's view, shared);
    it never delivers: what moves in these tests is the bus's end."""

    def __init__(self, ends: dict[int, int]) -> None:
        self.ends, self.closed = ends, False
        self.start = dict(ends)

    def assignment(self) -> list[Any]:
        return [SimpleNamespace(partition=p, offset=o) for p, o in sorted(self.start.items())]

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        return []

    def get_watermark_offsets(self, tp: Any, timeout: float,
                              cached: bool = False) -> tuple[int, int]:
        return 0, self.ends[tp.partition]

    def close(self) -> None:
        self.closed = True


def test_a_stalled_event_reader_is_replaced_at_the_end(monkeypatch):
    from streams.collect import snapshots

    ends = {0: 5, 1: 5, 2: 5}
    opened: list[_EventsConsumer] = []

    def open_at_end(run: Any, topic: str) -> _EventsConsumer:
        opened.append(_EventsConsumer(ends))
        return opened[-1]

    monkeypatch.setattr(snapshots, "_events_consumer", open_at_end)
    reader = snapshots._EventReader(None, "selfheal.logdir-events")  # type: ignore[arg-type]
    reader._watch.stall_s = 0.0  # due at every check
    assert reader.consume(0.0) == [] and reader.stalled() is None  # at the end: fine
    ends[1] = 7  # two events the stuck consumer never fetches
    why = reader.stalled()
    assert why is not None and "selfheal.logdir-events-1 at 5 of 7" in why
    assert "replaced" in why and len(opened) == 2 and opened[0].closed
    assert reader.consumer is opened[1] and reader.stalled() is None  # the new one: at 7


def test_an_event_reader_that_cannot_be_replaced_keeps_the_old_one(monkeypatch):
    from streams.collect import snapshots

    ends = {0: 5, 1: 5, 2: 5}
    first = _EventsConsumer(ends)
    calls: list[int] = []

    def open_once(run: Any, topic: str) -> _EventsConsumer:
        calls.append(1)
        if len(calls) > 1:
            raise OSError("the bus went away")
        return first

    monkeypatch.setattr(snapshots, "_events_consumer", open_once)
    reader = snapshots._EventReader(None, "selfheal.logdir-events")  # type: ignore[arg-type]
    reader._watch.stall_s = 0.0
    ends[0] = 6
    why = reader.stalled()
    assert why is not None and "no new reader yet (the bus went away)" in why
    assert reader.consumer is first and not first.closed
