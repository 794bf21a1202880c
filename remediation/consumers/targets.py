"""Reads one group's target from the compacted `selfheal.consumer-assignments` topic.

Its own consumer, with no group: it assigns every partition of the topic from the
beginning (compaction keeps the latest record per group) and keeps the newest record
keyed by the group. Every value crosses `schemas.wire` (through the record type); one it
refuses is logged and skipped: the topic belongs to `serve`, which dead-letters.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from schemas.records import ConsumerAssignment
from schemas.registry import RecordError

log = logging.getLogger("selfheal.consumers")


class TargetReader:
    """The newest target of ``group`` on ``topic``; `poll` never blocks."""

    def __init__(self, settings: Mapping[str, Any], topic: str, group: str,
                 cluster_id: str | None = None, timeout: float = 30.0) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.topic, self.group, self.cluster_id = topic, group, cluster_id
        self.latest: ConsumerAssignment | None = None
        self.refused = 0
        self.version = 0  # bumped whenever the latest target changes
        # confluent-kafka insists on a group.id; this reader never joins it or commits.
        self._consumer = Consumer({**settings, "group.id": f"{group}.selfheal-targets",
                                   "enable.auto.commit": False,
                                   "enable.partition.eof": False,
                                   "fetch.message.max.bytes": 16 << 20})
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
        self.caught_up = False

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
        return self.latest

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
