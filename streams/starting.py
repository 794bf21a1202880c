"""Where a fresh checkpoint starts reading: the latest snapshot first, then what is new.

`startingOffsets=latest` for every topic made a new job miss the snapshot the collector
takes at start-up and wait up to a snapshot interval for the next one, knowing nothing
of the cluster until then. The snapshot topic is compacted and keyed by cluster, so this
cluster's latest snapshot is the last record with its key: a fresh checkpoint starts
that topic there (found by reading back from the end, a few records at a time), and the
other topics at latest. An existing checkpoint resumes where it stopped.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from core.config import Config

# Records per partition searched for this cluster's latest snapshot (its manifest, or a
# whole one): a fleet's snapshot at 2.8M replicas is 64 chunks before its manifest.
LOOK_BACK = 128


def is_fresh(checkpoint: Path) -> bool:
    """True when the query at ``checkpoint`` has never planned a batch."""
    offsets = checkpoint / "offsets"
    return not offsets.is_dir() or not any(p.name.isdigit() for p in offsets.iterdir())


def snapshot_offsets(config: Config, cluster: str, timeout: float = 15.0) -> str:
    """Spark's `startingOffsets` JSON for the snapshot topic: per partition, the offset of
    ``cluster``'s latest snapshot, else its end (what arrives from now on)."""
    topic = config.topic("cluster-snapshots")
    start = {str(p): found if found is not None else end
             for p, (found, end) in latest_snapshots(config, cluster, timeout).items()}
    return json.dumps({topic: start})


def latest_snapshots(config: Config, cluster: str, timeout: float = 15.0
                     ) -> dict[int, tuple[int | None, int]]:
    """Per partition of the snapshot topic: the offset of ``cluster``'s latest snapshot
    record (a manifest or a whole snapshot) or None, and the partition's end."""
    from confluent_kafka import TopicPartition

    from core.bus import consumer, watermarks

    topic = config.topic("cluster-snapshots")
    reader = consumer(config, "selfheal-stream-start", **{"enable.auto.commit": False,
                                                          "auto.offset.reset": "earliest"})
    try:
        meta = reader.list_topics(topic, timeout=timeout)
        partitions = sorted(meta.topics[topic].partitions) if topic in meta.topics else []
        out: dict[int, tuple[int | None, int]] = {}
        for p in partitions:
            low, high = watermarks(reader, TopicPartition(topic, p), timeout)
            found = _latest_of(reader, TopicPartition, topic, p, max(low, high - LOOK_BACK),
                               high, cluster, timeout) if high > low else None
            out[p] = (found, high)
    finally:
        reader.close()
    return out


def _latest_of(reader: Any, partition_type: Any, topic: str, partition: int, first: int,
               end: int, cluster: str, timeout: float) -> int | None:
    """The offset of the last record keyed ``cluster`` in [first, end)."""
    reader.assign([partition_type(topic, partition, first)])
    found = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = reader.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            continue
        key = msg.key()
        if key is not None and key.decode("utf-8", "replace") == cluster:
            found = msg.offset()
        if msg.offset() >= end - 1:
            break
    reader.unassign()
    return found
