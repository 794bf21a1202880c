"""A fresh checkpoint's start search asks a freshly created snapshot topic's offsets
again while its partitions have not reached the broker yet, and starts over with a new
consumer when one consumer never learns them."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

import core.bus
from core.bus import BusError
from core.config import load
from streams import starting


class Reader:
    """A snapshot topic with one empty partition, unknown to this consumer ``unknown``
    times."""

    def __init__(self, unknown: int) -> None:
        self.unknown, self.asked, self.closed = unknown, 0, False

    def list_topics(self, topic: str, timeout: float):
        found = type("T", (), {"partitions": {0: object()}, "error": None})
        return type("Meta", (), {"topics": {topic: found}})

    def get_watermark_offsets(self, _partition, timeout: float) -> tuple[int, int]:
        self.asked += 1
        if self.asked <= self.unknown:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
        return 0, 0

    def close(self) -> None:
        self.closed = True


class Readers:
    """The consumers `core.bus.consumer` hands out, in turn."""

    def __init__(self, *unknown: int) -> None:
        self.waiting = [Reader(n) for n in unknown]
        self.made: list[Reader] = []

    def __call__(self, *_a, **_k) -> Reader:
        self.made.append(self.waiting.pop(0))
        return self.made[-1]


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setattr(starting.time, "sleep", lambda _s: None)
    return load(env={"SELFHEAL_SANDBOX_DIR": str(tmp_path),
                     "SELFHEAL_BUS_BOOTSTRAP_SERVERS": "127.0.0.1:9"})


def test_an_unknown_partition_is_asked_again_until_it_is_known(config, monkeypatch):
    readers = Readers(3)
    monkeypatch.setattr(core.bus, "consumer", readers)
    assert starting.latest_snapshots(config, "c1", timeout=5) == {0: (None, 0)}
    assert [r.asked for r in readers.made] == [4]
    assert readers.made[0].closed


def test_a_consumer_that_never_learns_the_partition_gives_way_to_a_new_one(
        config, monkeypatch):
    readers = Readers(10**9, 0)
    monkeypatch.setattr(core.bus, "consumer", readers)
    assert starting.latest_snapshots(config, "c1", timeout=0.3) == {0: (None, 0)}
    assert len(readers.made) == 2
    assert readers.made[0].asked > 1 and readers.made[1].asked == 1
    assert all(r.closed for r in readers.made)


def test_a_partition_no_consumer_learns_fails_with_what_to_check(config, monkeypatch):
    readers = Readers(*[10**9] * starting.TRIES)
    monkeypatch.setattr(core.bus, "consumer", readers)
    with pytest.raises(BusError) as failed:
        starting.latest_snapshots(config, "c1", timeout=0.3)
    assert len(readers.made) == starting.TRIES
    message = str(failed.value)
    assert "_UNKNOWN_PARTITION" in message
    assert f"{starting.TRIES} consumers" in message
    assert "bootstrap_servers" in message
