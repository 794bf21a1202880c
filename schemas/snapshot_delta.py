"""A failure's own evidence: a snapshot delta for the brokers concerned.

When a dir fails the snapshot collector sends at once, before the next full snapshot, a
small record (cluster-snapshot-delta.schema.json): the brokers concerned as a full
snapshot lists them and every partition with a replica on them, taken at ``taken_at``.
It goes on the snapshot topic with the cluster's key, so it is ordered against the full
snapshots, and names the full snapshot it follows (``base_taken_at``).

`apply_delta` makes base + delta: the base's entries of those brokers and of the
partitions on them replaced by the delta's, a partition the base had on them that the
delta lacks dropped (deleted since). What that cannot see, a partition moved entirely off
the brokers, the next full snapshot corrects: full snapshots stay the periodic truth.
`check_delta` is the record's one decoder. `snapshot_with_delta` is `apply_delta` over a
decoded snapshot, its partitions records or the compiled core's columns (the job keeps
each cluster's latest snapshot so), giving the snapshot the document path gives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import msgspec

from schemas import wire
from schemas.registry import RecordError, is_rfc3339
from schemas.snapshot_columns import PartitionColumns
from schemas.snapshot_decode import _BrokerDoc, _references_hold, dirs_by_broker
from schemas.snapshot_types import NO_LEADER, Broker, LogDir, Name, Partition, Snapshot

DELTA = "cluster-snapshot-delta"
MAX_BROKERS = 64  # the schema's maxItems: a delta is about a failure, not a cluster


class SnapshotDelta(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    version: Literal[1]
    cluster_id: Name
    taken_at: str
    base_taken_at: str | None
    reason: str
    brokers: tuple[_BrokerDoc, ...]
    partitions: tuple[Partition, ...]

    def broker_ids(self) -> set[int]:
        return {b.id for b in self.brokers}

    def dirs(self) -> dict[int, tuple[bool, dict[str, bool]]]:
        """broker -> (alive, {dir: online})."""
        return {b.id: (b.alive, {d.path: d.online for d in b.log_dirs}) for b in self.brokers}


_DECODER = msgspec.json.Decoder(SnapshotDelta)


def check_delta(value: bytes | None) -> SnapshotDelta:
    """Decode and check one delta record; `RecordError` says what is wrong."""
    if value is None or len(value) > wire.limit(DELTA):
        wire.decode(DELTA, value)  # raises: a tombstone, or over the limit
        raise AssertionError("unreachable")
    try:
        delta = _DECODER.decode(value)
    except msgspec.ValidationError as exc:
        raise _record_error(exc) from None
    except (msgspec.DecodeError, UnicodeDecodeError):
        wire.decode(DELTA, value)  # says why it is not JSON
        raise RecordError(DELTA, "$", "not a snapshot delta") from None
    for name in ("taken_at", "base_taken_at"):
        when = getattr(delta, name)
        if when is not None and not is_rfc3339(when):
            raise RecordError(DELTA, name, f"{when!r} is not an RFC 3339 date-time")
    if not delta.brokers or len(delta.brokers) > MAX_BROKERS:
        raise RecordError(DELTA, "brokers", f"{len(delta.brokers)} brokers; a delta names "
                                            f"1 to {MAX_BROKERS}")
    dirs: dict[int, set[str]] = {}
    for i, b in enumerate(delta.brokers):
        if b.id in dirs:
            raise RecordError(DELTA, f"brokers[{i}].id", f"broker {b.id} is listed twice")
        dirs[b.id] = {d.path for d in b.log_dirs}
    seen: set[tuple[str, int]] = set()
    for i, p in enumerate(delta.partitions):
        if (p.topic, p.partition) in seen:
            raise RecordError(DELTA, f"partitions[{i}]", f"{p.name} is listed twice")
        seen.add((p.topic, p.partition))
        if not any(r.broker in dirs for r in p.replicas):
            raise RecordError(DELTA, f"partitions[{i}]", f"{p.name} has no replica on the "
                                                         "delta's brokers")
        for k, r in enumerate(p.replicas):
            if r.broker in dirs and r.log_dir is not None and r.log_dir not in dirs[r.broker]:
                raise RecordError(DELTA, f"partitions[{i}].replicas[{k}].log_dir",
                                  f"{r.log_dir!r} is not a dir of broker {r.broker}")
    return delta


def _record_error(exc: msgspec.ValidationError) -> RecordError:
    problem, _, where = str(exc).rpartition(" - at `")
    if not problem:
        return RecordError(DELTA, "$", str(exc))
    return RecordError(DELTA, where.rstrip("`").removeprefix("$.").removeprefix("$") or "$",
                       problem)


def make_delta(doc: Mapping[str, Any], brokers: Iterable[int], base_taken_at: str | None,
               reason: str) -> dict[str, Any]:
    """The delta of snapshot document ``doc`` for ``brokers`` (those it lists)."""
    ids = set(brokers)
    return {
        "version": 1, "cluster_id": doc["cluster_id"], "taken_at": doc["taken_at"],
        "base_taken_at": base_taken_at, "reason": reason,
        "brokers": [b for b in doc["brokers"] if b["id"] in ids],
        "partitions": [p for p in doc["partitions"]
                       if any(r["broker"] in ids for r in p["replicas"])],
    }


def apply_delta(base: Mapping[str, Any], d: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot document ``base`` + the delta document ``d`` (checked by
    `check_delta`); a new document, ``base`` is kept."""
    ids = {b["id"] for b in d["brokers"]}
    brokers = {b["id"]: b for b in d["brokers"]}
    parts = {(p["topic"], p["partition"]): p for p in d["partitions"]}
    out_brokers = [brokers.pop(b["id"], b) for b in base["brokers"]]
    out_brokers += brokers.values()  # new to the base (the job dead-letters these)
    out_parts = []
    for p in base["partitions"]:
        key = (p["topic"], p["partition"])
        if key in parts:
            out_parts.append(parts.pop(key))
        elif not any(r["broker"] in ids for r in p["replicas"]):
            out_parts.append(p)
        # else: the base had it on the delta's brokers and the delta has not: deleted
    out_parts += parts.values()
    return {**base, "taken_at": d["taken_at"], "brokers": out_brokers,
            "partitions": out_parts}


def snapshot_with_delta(base: Snapshot, d: SnapshotDelta) -> Snapshot | None:
    """`apply_delta` over a decoded snapshot: base + the checked delta ``d``, with the
    partitions in the same order. Columns stay columns (the core builds the new ones, no
    record made). None when the result's cross-references do not hold, or a figure does
    not fit the core: the document path (`apply_delta`, then the snapshot's reader) then
    says what is wrong."""
    ids = d.broker_ids()
    new = {b.id: Broker(b.id, b.rack, b.alive, tuple(
        LogDir(x.path, x.online, x.total_bytes, x.usable_bytes, x.cordoned)
        for x in b.log_dirs), b.replica_selector) for b in d.brokers}
    brokers = tuple(new.pop(b.id, b) for b in base.brokers) + tuple(new.values())
    dirs = dirs_by_broker(brokers)
    if dirs is None:
        return None
    parts = base.partitions
    merged: PartitionColumns | tuple[Partition, ...]
    if isinstance(parts, PartitionColumns) and hasattr(parts.columns, "with_delta"):
        try:
            merged = PartitionColumns(parts.columns.with_delta(sorted(ids), [
                (p.topic, p.partition, p.leader, list(p.isr),
                 [(r.broker, r.log_dir, r.size_bytes) for r in p.replicas])
                for p in d.partitions]))
            holds = merged.columns.references_hold(
                [(b, list(paths)) for b, paths in dirs.items()], NO_LEADER)
        except OverflowError:  # a figure past 64 bits: the document path handles any int
            return None
    else:
        by_key = {(p.topic, p.partition): p for p in d.partitions}
        out = []
        for p in parts:
            found = by_key.pop((p.topic, p.partition), None)
            if found is not None:
                out.append(found)
            elif not any(r.broker in ids for r in p.replicas):
                out.append(p)
        merged = (*out, *by_key.values())
        holds = _references_hold(merged, dirs)
    if not holds:
        return None
    return dataclasses.replace(base, taken_at=d.taken_at, brokers=brokers, partitions=merged,
                               replicas_by_dir={})
