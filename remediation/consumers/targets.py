"""Reads one group's target from the compacted `selfheal.consumer-assignments` topic.

Its own consumer, with no group: it assigns every partition of the topic from the
beginning (compaction keeps the latest record per group) and keeps the newest record
keyed by the group. Every value crosses `schemas.wire` (through the record type); one it
refuses is logged and skipped: the topic belongs to `serve`, which dead-letters.

A reader that stops fetching while targets wait on the bus (librdkafka's assigned
consumer can, after every broker restarted: `core.bus.StallWatch`) would keep the group
on its last target until a restart; instead its consumer is replaced, each partition
starting after the last record read, and a warning says so.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from core.bus import StallWatch
from schemas.records import ConsumerAssignment
from schemas.registry import RecordError

log = logging.getLogger("selfheal.consumers")


class TargetReader:
    """The newest target of ``group`` on ``topic``. `poll` does not wait for records; when
    nothing came for `STALL_S` it asks the bus for the partitions' ends, at most `ASK_S`
    (once per `STALL_S`)."""

    STALL_S = 15.0
    ASK_S = 1.0

    def __init__(self, settings: Mapping[str, Any], topic: str, group: str,
                 cluster_id: str | None = None, timeout: float = 30.0) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        self.topic, self.group, self.cluster_id = topic, group, cluster_id
        self.latest: ConsumerAssignment | None = None
        self.refused = 0
        self.version = 0  # bumped whenever the latest target changes
        self.stalls = 0  # consumers replaced because they stopped fetching
        self._settings = settings
        self._consumer = self._open()
        meta = self._consumer.list_topics(topic, timeout=timeout)
        found = meta.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            self._consumer.close()
            raise LookupError(
                f"the target topic {topic} does not exist on the bus "
                f"({found.error if found is not None else 'not listed'}): start `selfheal "
                "serve` once (it creates the selfheal.* topics) or pass the topic name "
                "with your prefix")
        self._partitions = [TopicPartition(topic, p, OFFSET_BEGINNING)
                            for p in sorted(found.partitions)]
        self._consumer.assign(self._partitions)
        self._ends: dict[int, int] = {}
        self._positions: dict[int, int] = {}
        self._watch = StallWatch(topic, [tp.partition for tp in self._partitions],
                                 self.STALL_S, self.ASK_S)
        self.caught_up = False

    def _open(self) -> Any:
        from confluent_kafka import Consumer

        # confluent-kafka insists on a group.id; this reader never joins it or commits.
        return Consumer({**self._settings, "group.id": f"{self.group}.selfheal-targets",
                         "enable.auto.commit": False,
                         "enable.partition.eof": False,
                         "fetch.message.max.bytes": 16 << 20})

    def catch_up(self, timeout: float = 30.0) -> None:
        """Read to the end of the topic as it was when called (the newest target then)."""
        import time

        from confluent_kafka import TopicPartition

        for tp in self._partitions:
            _, high = self._consumer.get_watermark_offsets(
                TopicPartition(self.topic, tp.partition), timeout=timeout)
            self._ends[tp.partition] = high
        deadline = time.monotonic() + timeout
        while not self._reached_ends():
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"could not read {self.topic} to its end in {timeout:g} s; is the bus "
                    "reachable?")
            self._drain(0.2)
        self.caught_up = True

    def poll(self) -> ConsumerAssignment | None:
        """Take in what arrived; the newest target (None: none, or withdrawn)."""
        self._drain(0.0)
        stall = self._watch.check(self._consumer, lambda p: self._positions.get(p, 0))
        if stall is not None:
            self._replace(str(stall))
        return self.latest

    def _replace(self, why: str) -> None:
        """A new consumer where the old one stood (the start where nothing was read)."""
        from confluent_kafka import TopicPartition

        self.stalls += 1
        log.warning("the target reader of %s stopped fetching (%s); replacing its "
                    "consumer (librdkafka #5153)", self.group, why)
        self._consumer.close()
        self._consumer = self._open()
        self._consumer.assign([
            TopicPartition(self.topic, tp.partition,
                           self._positions.get(tp.partition, tp.offset))
            for tp in self._partitions])

    def close(self) -> None:
        self._consumer.close()

    def _reached_ends(self) -> bool:
        return all(self._positions.get(p, 0) >= end for p, end in self._ends.items())

    def _drain(self, timeout: float) -> None:
        while True:
            batch = self._consumer.consume(500, timeout=timeout)
            if not batch:
                return
            for msg in batch:
                partition, offset = msg.partition(), msg.offset()
                if msg.error() is not None or partition is None or offset is None:
                    continue
                self._positions[partition] = offset + 1
                self._watch.read()
                self._take(msg.key(), msg.value(), partition, offset)
            timeout = 0.0

    def _take(self, key: bytes | None, value: bytes | None, partition: int,
              offset: int) -> None:
        if key is None or key.decode("utf-8", "replace") != self.group:
            return
        if value is None:  # a tombstone withdraws the group's target
            if self.latest is not None:
                self.latest, self.version = None, self.version + 1
            return
        try:
            record = ConsumerAssignment.from_json(value)
        except RecordError as exc:
            self.refused += 1
            log.warning("skipped %s[%d]@%d: %s", self.topic, partition, offset, exc)
            return
        if record.group != self.group or (self.cluster_id is not None
                                          and record.cluster_id != self.cluster_id):
            return
        if record != self.latest:
            self.latest, self.version = record, self.version + 1
