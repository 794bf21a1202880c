"""The history check's reader re-creates a consumer that stalls, where it stood.

A librdkafka consumer that never fetches again after every broker restarted cannot be
brought about on demand, so here a stand-in consumer stops delivering while the
partition's high watermark says more is there."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaException, TopicPartition

from sandbox import traffic
from tests.polling import wait_until

TOPIC = "t"


class _Msg:
    def __init__(self, partition: int, offset: int) -> None:
        self._p, self._o = partition, offset

    def error(self) -> None:
        return None

    def value(self) -> bytes:
        return f"m-{self._p}-{self._o}".encode()

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o


class _Log:
    """Two partitions of 10 records each; the first consumer made stalls for good after
    `serve` records (None: never), the ones made after it deliver the rest."""

    def __init__(self, serve: int | None, bus_away: bool = False) -> None:
        self.serve, self.bus_away = serve, bus_away
        self.made: list[_Consumer] = []

    def consumer(self) -> _Consumer:
        c = _Consumer(self, first=not self.made)
        self.made.append(c)
        return c


class _Consumer:
    def __init__(self, log: _Log, first: bool) -> None:
        self.log, self.first = log, first
        self.at: dict[int, int] = {}
        self.delivered = 0
        self.asked = 0  # high watermark questions
        self.closed = False

    def assign(self, tps: list[Any]) -> None:
        self.at = {tp.partition: max(tp.offset, 0) for tp in tps}  # BEGINNING is -2

    def consume(self, num_messages: int, timeout: float) -> list[_Msg]:
        time.sleep(0.01)
        if self.first and self.log.serve is not None and self.delivered >= self.log.serve:
            return []  # stalled for good
        out = []
        for p, o in self.at.items():
            if o < 10:
                out.append(_Msg(p, o))
                self.at[p] = o + 1
                self.delivered += 1
                break
        return out

    def get_watermark_offsets(self, tp: Any, timeout: float,
                              cached: bool = False) -> tuple[int, int]:
        self.asked += 1
        if self.log.bus_away:
            raise KafkaException("all brokers down")
        return 0, 10

    def close(self) -> None:
        self.closed = True


def _reader(monkeypatch: pytest.MonkeyPatch, log: _Log) -> traffic.BackgroundConsumer:
    monkeypatch.setattr(traffic, "end_offsets",
                        lambda c, topic: [TopicPartition(topic, p, 10) for p in (0, 1)])
    reader = traffic.BackgroundConsumer(None, TOPIC)  # type: ignore[arg-type]
    reader.STALL_S = 0.2
    reader.ASK_S = 0.3
    monkeypatch.setattr(reader, "_consumer", log.consumer)
    return reader


def _read(reader: traffic.BackgroundConsumer, count: int = 20) -> None:
    """Start ``reader`` and wait (on a loaded machine, long) until it read ``count``."""
    reader.start()
    wait_until(lambda: len(reader.values) >= count, f"{count} records read", 60, every=0.02)


def test_a_stalled_reader_is_re_created_after_the_last_offset_read(monkeypatch):
    log = _Log(serve=7)
    reader = _reader(monkeypatch, log)
    _read(reader)
    reader.stop()
    assert sorted(reader.values) == sorted(f"m-{p}-{o}" for p in (0, 1) for o in range(10))
    assert len(log.made) == 2 and log.made[0].closed
    assert len(reader.stalls) == 1
    # what the first one had read, the second did not read again
    assert reader.stalls[0].endswith("t-0 at 7 of 10, t-1 at 0 of 10")


def test_a_reader_that_keeps_up_is_left_alone(monkeypatch):
    log = _Log(serve=None)
    reader = _reader(monkeypatch, log)
    _read(reader)
    time.sleep(0.5)  # past the stall time, with nothing left to read
    reader.stop()
    assert len(reader.values) == 20 and len(log.made) == 1 and reader.stalls == []


def test_nothing_is_re_created_while_the_bus_cannot_say_what_is_there(monkeypatch):
    log = _Log(serve=3, bus_away=True)
    reader = _reader(monkeypatch, log)
    _read(reader, 3)
    # one stall check asks every 0.25 s until its 0.3 s run out (2 or 3 questions), so
    # a fourth question is a second check
    wait_until(lambda: log.made[0].asked >= 4, "the stall check asking the bus twice", 60)
    reader.stop()
    assert len(reader.values) == 3 and len(log.made) == 1 and reader.stalls == []


def test_a_message_read_twice_says_where_each_copy_was_read():
    """Two offsets: a duplicate in the log; the same offset twice: the reader's re-read."""
    producer = traffic.BackgroundProducer(None, TOPIC)  # type: ignore[arg-type]
    reader = traffic.BackgroundConsumer(None, TOPIC)  # type: ignore[arg-type]
    producer.acked = ["a", "b", "c"]
    producer.at = {"a": (0, 5), "b": (1, 2), "c": (0, 6)}
    reader.values = ["a", "b", "a", "c", "b"]
    reader.read_at = [(0, 5), (1, 2), (0, 9), (0, 6), (1, 2)]
    twice = [v for v in producer.acked if reader.values.count(v) > 1]
    assert traffic.where_twice(producer, reader, twice) == (
        "a acknowledged at 0@5, read at ['0@5', '0@9']; "
        "b acknowledged at 1@2, read at ['1@2', '1@2']")
