"""A fresh checkpoint's start search asks a freshly created snapshot topic's offsets
again while its partitions have not reached the broker yet."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

import core.bus
from core.config import load
from streams import starting


class Reader:
    """A snapshot topic with one empty partition, unknown to the broker ``unknown`` times."""

    def __init__(self, topic: str, unknown: int) -> None:
        self.topic, self.unknown, self.asked = topic, unknown, 0

    def list_topics(self, topic: str, timeout: float):
        partitions = {0: object()}
        return type("Meta", (), {"topics": {topic: type("T", (), {"partitions": partitions})}})

    def get_watermark_offsets(self, _partition, timeout: float) -> tuple[int, int]:
        self.asked += 1
        if self.asked <= self.unknown:
            raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
        return 0, 0

    def close(self) -> None:
        pass


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setattr(starting.time, "sleep", lambda _s: None)
    return load(env={"SELFHEAL_SANDBOX_DIR": str(tmp_path),
                     "SELFHEAL_BUS_BOOTSTRAP_SERVERS": "127.0.0.1:9"})


def test_an_unknown_partition_is_asked_again_until_it_is_known(config, monkeypatch):
    reader = Reader(config.topic("cluster-snapshots"), unknown=3)
    monkeypatch.setattr(core.bus, "consumer", lambda *_a, **_k: reader)
    assert starting.latest_snapshots(config, "c1", timeout=5) == {0: (None, 0)}
    assert reader.asked == 4


def test_a_partition_never_known_fails_after_the_timeout(config, monkeypatch):
    reader = Reader(config.topic("cluster-snapshots"), unknown=10**9)
    monkeypatch.setattr(core.bus, "consumer", lambda *_a, **_k: reader)
    with pytest.raises(KafkaException, match="Unknown topic or partition"):
        starting.latest_snapshots(config, "c1", timeout=0.05)
