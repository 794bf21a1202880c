"""Read one snapshot record back from the bus by its coordinates (driver side).

The detector's state holds where the latest snapshot of each cluster sits, not the
snapshot; when a decision needs the planner, this fetches that one record with
confluent-kafka (one consumer, assigned per read, no group offsets). Snapshots are keyed
by cluster on a compacted topic: if compaction removed the record, the next record of
the same cluster is newer and serves as well.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from core.config import Config
from streams.detect_types import SnapshotRef


class SnapshotMissing(LookupError):
    """The referenced snapshot could not be read back from the bus."""


class _ClusterOnly(msgspec.Struct):
    cluster_id: str = ""


class SnapshotReader:
    """``reader(ref, cluster_id)`` -> the snapshot record's value; `close()` when done."""

    def __init__(self, config: Config, timeout: float = 30.0) -> None:
        self.config = config
        self.timeout = timeout
        self._consumer: Any = None

    def __call__(self, ref: SnapshotRef, cluster_id: str) -> bytes:
        from confluent_kafka import TopicPartition

        from core.bus import consumer

        if self._consumer is None:
            # A reader kept across batches must not plan on a five-minute-old view of who
            # leads the snapshots partition: a failed dir or broker moves its leader.
            self._consumer = consumer(self.config, "selfheal-stream-snapshot-reader",
                                      **{"enable.auto.commit": False,
                                         "auto.offset.reset": "earliest",
                                         "topic.metadata.refresh.interval.ms": 5000})
        self._consumer.assign([TopicPartition(ref.topic, ref.partition, ref.offset)])
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            msg = self._consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                raise SnapshotMissing(f"reading {ref.topic}[{ref.partition}]@{ref.offset}: "
                                      f"{msg.error()}")
            if msg.offset() < ref.offset or not _same_cluster(msg, cluster_id):
                continue
            return bytes(msg.value())
        raise SnapshotMissing(
            f"no snapshot of cluster {cluster_id} at or after {ref.topic}[{ref.partition}]"
            f"@{ref.offset} within {self.timeout:.0f} s; is the bus reachable?")

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def _same_cluster(msg: Any, cluster_id: str) -> bool:
    key = msg.key()
    if key is not None:
        return bool(key.decode("utf-8", "replace") == cluster_id)
    try:  # unkeyed: read only the cluster id out of the document
        return msgspec.json.decode(msg.value(), type=_ClusterOnly).cluster_id == cluster_id
    except (ValueError, TypeError):  # not JSON, not UTF-8 (msgspec raises the codec's error)
        return False
