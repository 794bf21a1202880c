"""Read one snapshot record back from the bus by its coordinates (driver side).

The detector's state holds where the latest snapshot of each cluster sits, not the
snapshot; when a decision needs the planner, this fetches that one record with
confluent-kafka (one consumer, assigned per read, no group offsets). Snapshots are keyed
by cluster on a compacted topic: if compaction removed the record, the next record of
the same cluster is newer and serves as well.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import msgspec

from core.config import Config
from schemas import snapshot_chunks as chunking
from schemas.registry import RecordError
from streams.detect_types import SnapshotRef

# Rounds of the chunk search before a manifest, each looking four times further back.
LOOK_BACK_ROUNDS = 4


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
        deadline = time.monotonic() + self.timeout
        polled = _Polled(self._open(), ref, deadline)
        for msg in polled:
            if (msg.offset() < ref.offset or msg.value() is None
                    or not _same_cluster(msg, cluster_id)):
                continue  # a tombstone is no snapshot either
            value = bytes(msg.value())
            kind = chunking.kind_of(value)
            if kind in (chunking.CHUNK, chunking.DELTA):  # a part, or a failure's delta
                continue
            if kind == chunking.MANIFEST:
                return self._assembled(value, ref.topic, ref.partition, msg.offset(),
                                       deadline)
            return value
        why = (f"; last error {polled.error}" if polled.error is not None
               else "; is the bus reachable?")
        raise SnapshotMissing(
            f"no snapshot of cluster {cluster_id} at or after {ref.topic}[{ref.partition}]"
            f"@{ref.offset} within {self.timeout:.0f} s{why}")

    def delta(self, ref: SnapshotRef, cluster_id: str) -> bytes:
        """The failure delta record at exactly ``ref`` (schemas/snapshot_delta.py)."""
        polled = _Polled(self._open(), ref, time.monotonic() + self.timeout)
        for msg in polled:
            if msg.offset() == ref.offset and msg.value() is not None:
                value = bytes(msg.value())
                if chunking.kind_of(value) == chunking.DELTA:
                    return value
            break
        why = (f"; last error {polled.error}" if polled.error is not None
               else " (compacted away?)")
        raise SnapshotMissing(f"no snapshot delta of cluster {cluster_id} at {ref.topic}"
                              f"[{ref.partition}]@{ref.offset}{why}")

    def _open(self) -> Any:
        from core.bus import consumer

        if self._consumer is None:
            # A reader kept across batches must not plan on a five-minute-old view of who
            # leads the snapshots partition: a failed dir or broker moves its leader.
            self._consumer = consumer(self.config, "selfheal-stream-snapshot-reader",
                                      **{"enable.auto.commit": False,
                                         "auto.offset.reset": "earliest",
                                         "topic.metadata.refresh.interval.ms": 5000})
        return self._consumer

    def _assembled(self, value: bytes, topic: str, partition: int, offset: int,
                   deadline: float) -> bytes:
        try:
            manifest = chunking.check_manifest(value)
        except RecordError as exc:
            raise SnapshotMissing(f"the snapshot manifest at {topic}[{partition}]@{offset} "
                                  f"is refused: {exc}") from None
        found = find_chunks(self._consumer, topic, partition, offset, manifest,
                            max(1.0, deadline - time.monotonic()))
        try:
            return chunking.assemble(manifest, found)
        except chunking.ChunkError as exc:
            raise SnapshotMissing(str(exc)) from None

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


class _Polled:
    """The records of ``ref``'s partition from its offset on, until ``deadline``.

    An error on the way (e.g. the partition's leader moving off the very dir that
    failed) is one librdkafka recovers from by itself, so it is waited out and kept in
    ``error`` for the caller's message; a fatal one ends the records."""

    def __init__(self, consumer: Any, ref: SnapshotRef, deadline: float) -> None:
        from confluent_kafka import TopicPartition

        consumer.assign([TopicPartition(ref.topic, ref.partition, ref.offset)])
        self.consumer, self.deadline = consumer, deadline
        self.error: Any = None

    def __iter__(self) -> Iterator[Any]:
        while time.monotonic() < self.deadline:
            msg = self.consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                self.error = msg.error()
                if self.error.fatal():
                    return
                continue
            yield msg


def _same_cluster(msg: Any, cluster_id: str) -> bool:
    key = msg.key()
    if key is not None:
        return bool(key.decode("utf-8", "replace") == cluster_id)
    try:  # unkeyed: read only the cluster id out of the document
        return msgspec.json.decode(msg.value(), type=_ClusterOnly).cluster_id == cluster_id
    except (ValueError, TypeError):  # not JSON, not UTF-8 (msgspec raises the codec's error)
        return False


def find_chunks(consumer: Any, topic: str, partition: int, manifest_offset: int,
                manifest: chunking.Manifest, timeout: float,
                found: dict[str, bytes] | None = None) -> dict[str, bytes]:
    """The manifest's chunks (values by digest) among the records before it in its
    partition, with ``found`` already in hand. The collector writes them just before
    the manifest, so the search starts a few records back and looks four times further
    each round (`LOOK_BACK_ROUNDS` rounds at most, never past the partition's start, and
    within ``timeout``); checked chunks only (`check_chunk`): a record
    with the right digest that is not a good chunk is not used, and not looked for again
    (a digest names its bytes). Returns what it found; the caller says what is missing."""
    from confluent_kafka import TopicPartition

    out = dict(found or {})
    wanted = {ref.sha256: ref.bytes for ref in manifest.chunks if ref.sha256 not in out}
    if not wanted:
        return out
    sizes = set(wanted.values())
    deadline = time.monotonic() + timeout
    low, _high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                timeout=max(1.0, timeout))
    back = len(manifest.chunks) + 8
    end = manifest_offset
    rounds = 0
    # At most LOOK_BACK_ROUNDS rounds (64x the first look): a manifest naming chunks that
    # were never written (forged, or a bug) costs one bounded search, not a read of the
    # partition.
    while wanted and time.monotonic() < deadline and rounds < LOOK_BACK_ROUNDS:
        rounds += 1
        start = max(low, manifest_offset - back)
        consumer.assign([TopicPartition(topic, partition, start)])
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            if msg.offset() >= end:
                break
            value = msg.value()
            if value is not None and len(value) in sizes:
                key = chunking.digest(value)
                if key in wanted:
                    del wanted[key]  # a refused one: the same bytes anywhere else too
                    try:
                        chunking.check_chunk(value)
                    except RecordError:
                        continue
                    out[key] = bytes(value)
                if not wanted:
                    break
        if start <= low:
            break
        end = start  # the next round reads only what this one did not
        back *= 4
    consumer.unassign()
    return out


class BusChunks:
    """`find_chunks` from the bus's client settings (`core.bus.client_config`, security
    included), for the job's decode step; picklable (its consumer is made on first use,
    in the process that uses it, and kept there until `close`)."""

    def __init__(self, client: dict[str, Any], timeout: float = 10.0) -> None:
        # The logger object does not pickle; consumer_on adds its own.
        self.client = {k: v for k, v in client.items() if k != "logger"}
        self.timeout = timeout
        self._consumer: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"client": self.client, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["client"], state["timeout"])  # type: ignore[misc]

    def __call__(self, topic: str, partition: int, offset: int,
                 manifest: chunking.Manifest, found: dict[str, bytes]) -> dict[str, bytes]:
        from core.bus import consumer_on

        if self._consumer is None:
            self._consumer = consumer_on(
                self.client, "selfheal-stream-chunks",
                **{"enable.auto.commit": False, "auto.offset.reset": "earliest",
                   "topic.metadata.refresh.interval.ms": 5000})
        try:
            return find_chunks(self._consumer, topic, partition, offset, manifest,
                               self.timeout, found)
        except Exception:
            self._consumer.close()  # a fresh connection next time
            self._consumer = None
            raise

    def close(self) -> None:
        """Close the consumer, if one was made."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def read_latest(config: Config, cluster_id: str, timeout: float = 30.0) -> bytes:
    """``cluster_id``'s latest snapshot on the bus as one whole document (a chunked one
    assembled): what the job would plan from next. `SnapshotMissing` when there is none."""
    from streams.starting import latest_snapshots

    topic = config.topic("cluster-snapshots")
    found = {p: at for p, (at, _end) in latest_snapshots(config, cluster_id).items()
             if at is not None}
    if not found:
        raise SnapshotMissing(
            f"no snapshot of cluster {cluster_id} among the last records of {topic}; is "
            "`selfheal collect snapshots` running against this cluster and bus?")
    reader = SnapshotReader(config, timeout)
    try:
        values = [reader(SnapshotRef(topic, p, at, 0), cluster_id)
                  for p, at in sorted(found.items())]
    finally:
        reader.close()
    if len(values) == 1:
        return values[0]
    from core import clock

    return max(values, key=lambda v: clock.epoch_ms(
        msgspec.json.decode(v, type=_TakenAt).taken_at))


class _TakenAt(msgspec.Struct):
    taken_at: str
