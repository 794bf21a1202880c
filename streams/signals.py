"""Kafka records in, detection signals and dead letters out (the job's `mapInPandas` step).

Every record is decoded and validated with its topic's Great Expectations suite; a bad
one leaves as a dead letter carrying its reason, its raw text and its topic, partition
and offset. Of the good ones only what detection reads goes on: the per-dir offline
gauge and the offline-dir count (not the per-partition sizes, which are nearly all of
the metrics and which snapshots carry anyway), log-dir failures and departures, and each
snapshot reduced to its facts. This is where the volume drops, before any shuffle.

Runs on the executors: pure functions of pandas frames, no Spark calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import msgspec

from core import clock
from schemas import snapshot_chunks as chunking
from schemas import wire
from schemas.records import DeadLetter
from schemas.registry import RecordError
from schemas.snapshot import SnapshotError, snapshot_from_dict
from schemas.snapshot_columns import read_columns
from schemas.snapshot_decode import decode_snapshot
from schemas.snapshot_delta import check_delta
from schemas.snapshot_types import Snapshot
from streams.facts import FactLimits, snapshot_facts
from streams.prescreen import is_certain_gauge
from streams.validate import LOADER, OFFLINE_GAUGE, NotJson, checked_columns, suites

# What the step emits, one row per signal (Spark DDL; the job's stateful step reads it).
SIGNAL_DDL = (
    "key STRING, kind STRING, event_ts TIMESTAMP, broker BIGINT, log_dir STRING, "
    "source STRING, body STRING, topic STRING, partition INT, offset BIGINT"
)
SIGNAL_COLUMNS = [c.split()[0] for c in SIGNAL_DDL.split(", ")]

# kind values
FAILURE = "failure"  # a log dir failed (broker and dir when known)
ONLINE = "online"  # the per-dir gauge reads 0
GONE = "gone"  # a broker deregistered
BACK = "back"  # a broker registered again
SNAPSHOT = "snapshot"  # body: SnapshotFacts JSON
DELTA = "delta"  # body: the snapshot delta record (schemas/snapshot_delta.py), checked
REJECT = "reject"  # body: the DeadLetter JSON; key is ""

COUNT_GAUGE = "kafka_log_offline_log_directory_count"

# (topic, partition, manifest offset, manifest, chunks found so far by digest) -> the
# chunks found (streams/snapshot_reader.py `BusChunks`): a manifest whose chunks came in
# an earlier micro-batch, or before a fresh checkpoint's first offset.
ChunkSource = Callable[[str, int, int, chunking.Manifest, dict[str, bytes]], dict[str, bytes]]


def decode(schema: str, value: bytes | None, max_bytes: int | None = None) -> Any:
    """The decoded JSON value (through the one bounded decoder), or `NotJson` saying why
    there is none: never an exception, whatever the bytes."""
    try:
        return wire.decode(schema, value, max_bytes)
    except RecordError as exc:
        return NotJson(exc.problem)


class Rows:
    """Output rows, column by column."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {c: [] for c in SIGNAL_COLUMNS}

    def add(self, key: str, kind: str, ms: int, topic: str, partition: int, offset: int, *,
            broker: int | None = None, log_dir: str | None = None, source: str | None = None,
            body: str | None = None) -> None:
        for name, value in (("key", key), ("kind", kind), ("event_ts", ms), ("broker", broker),
                            ("log_dir", log_dir), ("source", source), ("body", body),
                            ("topic", topic), ("partition", partition), ("offset", offset)):
            self.columns[name].append(value)

    def frame(self) -> Any:
        import pandas as pd

        frame = pd.DataFrame(self.columns, columns=SIGNAL_COLUMNS)
        frame["event_ts"] = pd.to_datetime(frame["event_ts"], unit="ms", utc=True)
        frame["broker"] = frame["broker"].astype("Int64")
        frame["partition"] = frame["partition"].astype("int32")
        frame["offset"] = frame["offset"].astype("int64")
        return frame


def to_signals(frames: Iterator[Any], schemas: Mapping[str, str],
               limits: FactLimits, chunk_source: ChunkSource | None = None,
               snapshots: dict[tuple[str, int, int], bytes] | None = None
               ) -> Iterator[Any]:
    """The `mapInPandas` body: Kafka rows (topic, partition, offset, timestamp, value) in,
    `SIGNAL_DDL` rows out. ``schemas`` maps each input topic to its schema name;
    ``chunk_source`` finds a chunked snapshot's chunks that are not in the batch;
    ``snapshots``, when given, gets each valid snapshot's value (assembled) by its
    coordinates, for the driver to keep (streams/keeper.py) without reading it again.

    The whole partition is validated at once: a GX run has a fixed cost (~0.15 s per
    suite) that Arrow's 10,000-row chunks would pay again and again.
    """
    import pandas as pd

    chunks = [f for f in frames if len(f)]
    rows = Rows()
    if chunks:
        batch = pd.concat(chunks, ignore_index=True) if len(chunks) > 1 else chunks[0]
        for topic, group in batch.groupby("topic", sort=False):
            name = schemas.get(str(topic))
            if name is None:
                raise ValueError(f"the job read topic {topic!r}, which it does not know; "
                                 f"known: {', '.join(schemas)}")
            _topic_signals(rows, name, group, limits, chunk_source, snapshots)
    if rows.columns["kind"]:
        # An empty frame would still go through Arrow, where pyspark 4.2 with pyarrow
        # 26 fails to convert it ("Cannot convert ChunkedArray to Array"): yield none.
        yield rows.frame()


def _topic_signals(rows: Rows, name: str, group: Any, limits: FactLimits,
                   chunk_source: ChunkSource | None = None,
                   snapshots: dict[tuple[str, int, int], bytes] | None = None) -> None:
    topics = group["topic"].tolist()
    partitions = group["partition"].tolist()
    offsets = group["offset"].tolist()
    stamps = (group["timestamp"].astype("int64") // 1_000_000).tolist()  # ns -> ms
    values = group["value"].tolist()
    raws = values  # what a dead letter carries: the record, not what was made of it
    extra: dict[str, list[Any]] = {}
    facts: list[tuple[str, int, str] | None] = []
    if name == "cluster-snapshot":
        keep, values, caps = _unchunk(rows, topics, partitions, offsets, stamps, values,
                                      chunk_source)
        if len(keep) < len(raws):
            topics, partitions, offsets, stamps, raws = (
                [column[i] for i in keep]
                for column in (topics, partitions, offsets, stamps, raws))
        docs, extra[LOADER], facts = _snapshots(values, limits, caps)
    else:
        docs = [decode(name, v) for v in values]
    reasons = _reasons(name, docs, values, extra)
    latest = int(clock.now().timestamp() * 1000) + limits.max_clock_ahead_ms
    for i, reason in enumerate(reasons):
        where = (topics[i], partitions[i], offsets[i])
        doc = docs[i]
        if reason is None:
            reason = _from_the_future(doc, facts[i] if facts else None, latest)
        if reason is not None:
            cluster = doc.get("cluster_id") if type(doc) is dict else None
            rows.add("", REJECT, stamps[i], *where, body=_dead_letter(
                raws[i], f"{reason} (suite {name})", where,
                cluster if type(cluster) is str else None))
        else:
            try:
                _signal(rows, name, doc, facts[i] if facts else None, where)
                if snapshots is not None and facts and values[i] is not None:
                    snapshots[where] = values[i]
            except Exception as exc:  # total: a record never fails a task
                rows.add("", REJECT, stamps[i], *where, body=_dead_letter(
                    raws[i], f"$: cannot be read as a {name}: {type(exc).__name__}: {exc}",
                    where, None))


def _reasons(name: str, docs: list[Any], values: list[bytes | None],
             extra: dict[str, list[Any]]) -> list[str | None]:
    """Each record's suite verdict. The collectors' offline-dir gauges in their canonical
    form are certainly valid (streams/prescreen.py) and skip the suite: an idle batch is
    nearly all of them, and a suite run has a fixed cost."""
    certain = ([is_certain_gauge(v) for v in values] if name == "broker-metric"
               else [False] * len(docs))
    rest = [i for i, sure in enumerate(certain) if not sure]
    out: list[str | None] = [None] * len(docs)
    if not rest:
        return out
    if len(rest) < len(docs):
        docs = [docs[i] for i in rest]
        extra = {k: [v[i] for i in rest] for k, v in extra.items()}
    for i, reason in zip(rest, suites().reasons(name, checked_columns(name, docs, extra)),
                         strict=True):
        out[i] = reason
    return out


def _from_the_future(doc: dict[str, Any], facts: tuple[str, int, str] | None,
                     latest: int) -> str | None:
    """Why a valid record's time is too far ahead of this job's clock; None when it is not."""
    field, ms = (("taken_at", facts[1]) if facts is not None
                 else ("event_time", clock.epoch_ms(doc["event_time"])))
    if ms <= latest:
        return None
    return (f"{field}: {doc.get(field)} is in the future, {(ms - latest) / 1000:.0f} s past "
            "what this job's clock allows ([detect] max_clock_ahead_seconds); a record from "
            "the future would make every other record of its cluster late: fix the "
            "producer's clock")


def _signal(rows: Rows, name: str, doc: dict[str, Any], facts: tuple[str, int, str] | None,
            where: tuple[str, int, int]) -> None:
    if name == "broker-metric":
        _metric(rows, doc, where)
    elif name == "logdir-event":
        _event(rows, doc, where)
    else:
        assert facts is not None  # set for every snapshot the suite accepts
        cluster_id, ms, body = facts
        rows.add(cluster_id, SNAPSHOT, ms, *where, body=body)


def _unchunk(rows: Rows, topics: list[str], partitions: list[int], offsets: list[int],
             stamps: list[int], values: list[bytes | None], source: ChunkSource | None
             ) -> tuple[list[int], list[bytes | None], list[int]]:
    """A chunked snapshot's records (schemas/snapshot_chunks.py) made whole: each chunk is
    checked as it comes (a bad one is a dead letter) and signals nothing; a failure's
    delta (schemas/snapshot_delta.py) is checked by its decoder and signals as it is,
    small; each manifest becomes its assembled snapshot, from chunks in this batch or
    found before it on the bus, and a manifest whose chunks cannot all be found is a
    dead letter saying so.
    Returns the rows that go on as snapshots (whole ones and assembled manifests), their
    values, and each one's size limit."""
    kinds = [chunking.kind_of(v) for v in values]
    plain = wire.limit("cluster-snapshot")
    if all(k == chunking.SNAPSHOT for k in kinds):
        return list(range(len(values))), values, [plain] * len(values)

    def refuse(i: int, reason: str, cluster: str | None = None) -> None:
        where = (topics[i], partitions[i], offsets[i])
        rows.add("", REJECT, stamps[i], *where,
                 body=_dead_letter(values[i], reason, where, cluster))

    in_batch: dict[str, bytes] = {}
    refused: dict[str, int] = {}  # digest -> offset of a chunk refused in this batch
    for i, kind in enumerate(kinds):
        if kind == chunking.DELTA:
            try:
                delta = check_delta(values[i])
            except RecordError as exc:
                refuse(i, str(exc))
                continue
            value = values[i]
            assert value is not None  # check_delta refuses a tombstone
            rows.add(delta.cluster_id, DELTA, clock.epoch_ms(delta.taken_at), topics[i],
                     partitions[i], offsets[i], body=bytes(value).decode("utf-8"))
            continue
        if kind == chunking.CHUNK:
            try:
                chunking.check_chunk(values[i])
            except RecordError as exc:
                refuse(i, str(exc))
                value = values[i]
                if value is not None:
                    refused[chunking.digest(value)] = offsets[i]
                continue
            value = values[i]
            assert value is not None  # a tombstone is not a chunk
            in_batch[chunking.digest(value)] = value
    keep: list[int] = []
    out: list[bytes | None] = []
    for i, kind in enumerate(kinds):
        if kind == chunking.SNAPSHOT:
            keep.append(i)
            out.append(values[i])
        elif kind == chunking.MANIFEST:
            cluster = None
            try:
                manifest = chunking.check_manifest(values[i])
                cluster = manifest.cluster_id
                for seq, ref in enumerate(manifest.chunks):
                    if ref.sha256 in refused:  # no use looking for it on the bus
                        raise chunking.ChunkError(
                            f"chunk {seq} of snapshot {manifest.snapshot_id} was refused "
                            f"(its dead letter names offset {refused[ref.sha256]}); the "
                            "next complete snapshot serves instead")
                found = {ref.sha256: in_batch[ref.sha256] for ref in manifest.chunks
                         if ref.sha256 in in_batch}
                if source is not None and chunking.missing(manifest, found):
                    found = source(topics[i], partitions[i], offsets[i], manifest, found)
                out.append(chunking.assemble(manifest, found))
                keep.append(i)
            except (RecordError, chunking.ChunkError) as exc:
                refuse(i, str(exc), cluster)
            except Exception as exc:  # total: the bus, a record: never fails a task
                refuse(i, f"$: the chunks of this snapshot manifest could not be read: "
                          f"{type(exc).__name__}: {exc}", cluster)
    caps = [plain if kinds[i] == chunking.SNAPSHOT else chunking.MAX_ASSEMBLED_BYTES
            for i in keep]
    return keep, out, caps


def _snapshots(values: list[bytes | None], limits: FactLimits, caps: list[int] | None = None
               ) -> tuple[list[Any], list[str | None], list[tuple[str, int, str] | None]]:
    """Decode, check and reduce snapshots one at a time (one of 100,000 partitions is a
    few hundred MB as Python objects): per record, the top-level fields for the suite
    (arrays emptied: the loader checks their insides), the loader's error, the facts.
    ``caps``: each value's size limit (an assembled snapshot may be larger than a record)."""
    docs: list[Any] = []
    errors: list[str | None] = []
    facts: list[tuple[str, int, str] | None] = []
    for k, value in enumerate(values):
        cap = caps[k] if caps is not None else wire.limit("cluster-snapshot")
        fast = _typed(value, cap)
        snapshot: Snapshot | None = None
        if fast is not None:
            doc, snapshot = fast
        else:
            doc = decode("cluster-snapshot", value, cap)
        error = found = None
        if type(doc) is dict:
            try:
                if snapshot is None:
                    snapshot = snapshot_from_dict(doc)
                found = (snapshot.cluster_id, clock.epoch_ms(snapshot.taken_at),
                         snapshot_facts(snapshot, limits).to_json())
            except SnapshotError as exc:
                error = str(exc)
            except ValueError as exc:  # a time the suite rejects anyway
                error = f"taken_at: {exc}"
            except Exception as exc:  # total: a record never fails a task
                error = f"$: cannot be read as a snapshot: {type(exc).__name__}: {exc}"
            doc = {k: [] if type(v) is list else v for k, v in doc.items()}
        docs.append(doc)
        errors.append(error)
        facts.append(found)
    return docs, errors, facts


_TOP_LEVEL = msgspec.json.Decoder(dict[str, msgspec.Raw])


def _typed(value: bytes | None, cap: int | None = None
           ) -> tuple[dict[str, Any], Snapshot] | None:
    """The common case, fast: the typed decoder accepts the snapshot as it stands (its
    checks are the walker's), and the suite gets the top-level fields with the arrays
    left empty, as below, without building the arrays' contents twice (a 300,000-replica
    snapshot: 0.3 s instead of 1.7 s). None sends the record down the checking path."""
    if value is None or len(value) > (wire.limit("cluster-snapshot") if cap is None else cap):
        return None
    try:  # total: whatever the bytes, the checking path below says what is wrong
        # The compiled core's columns where it takes the document (the same yes or no:
        # schemas/snapshot_columns.py): a fleet's 0.04 CPU s instead of 0.2, and its
        # facts 0.3 instead of 0.45.
        snapshot = read_columns(value) if type(value) is bytes else None
        if snapshot is None:
            snapshot = decode_snapshot(value)
        if snapshot is None:
            return None
        top = _TOP_LEVEL.decode(value)
        return {k: [] if memoryview(raw)[:1] == b"[" else msgspec.json.decode(raw)
                for k, raw in top.items()}, snapshot
    except Exception:  # noqa: BLE001
        return None


def _dead_letter(value: bytes | None, reason: str, where: tuple[str, int, int],
                 cluster_id: str | None) -> str:
    letter = DeadLetter.reject(value, reason, *where, cluster_id=cluster_id,
                               event_time=clock.text())
    return letter.to_json().decode("utf-8")


def _metric(rows: Rows, doc: dict[str, Any], where: tuple[str, int, int]) -> None:
    metric = doc["metric"]
    if metric == OFFLINE_GAUGE:
        kind = FAILURE if doc["value"] >= 1 else ONLINE
        rows.add(doc["cluster_id"], kind, clock.epoch_ms(doc["event_time"]), *where,
                 broker=int(doc["broker"]), log_dir=doc["labels"]["log_dir"], source="metric")
    elif metric == COUNT_GAUGE and doc["value"] > 0:
        rows.add(doc["cluster_id"], FAILURE, clock.epoch_ms(doc["event_time"]), *where,
                 broker=int(doc["broker"]), source="metric")


def _event(rows: Rows, doc: dict[str, Any], where: tuple[str, int, int]) -> None:
    broker = doc.get("broker")
    broker = int(broker) if broker is not None else None
    ms = clock.epoch_ms(doc["event_time"])
    if doc["kind"] == "log_dir_failure":
        rows.add(doc["cluster_id"], FAILURE, ms, *where, broker=broker,
                 log_dir=doc.get("log_dir"), source="logdir_event")
    elif doc["kind"] == "broker_deregistered" and broker is not None:
        rows.add(doc["cluster_id"], GONE, ms, *where, broker=broker, source="logdir_event")
    elif doc["kind"] == "broker_registered" and broker is not None:
        rows.add(doc["cluster_id"], BACK, ms, *where, broker=broker, source="logdir_event")
