"""The cluster snapshot's validating loader (the records are in schemas/snapshot_types.py).

`cluster-snapshot.schema.json` is the documented source of truth for the structure. The
loader does not run jsonschema on every snapshot: on 100,000 partitions that costs
seconds. JSON text goes first through the typed decoder (schemas/snapshot_decode.py:
msgspec straight into the records, then the cross-references), which only says yes or
no. A document it refuses, and every decoded dict (`snapshot_from_dict`), goes through
the checking walker here: hand-written checks that accept and reject what the schema
does (unit tests hold the schema, the walker and the decoder together), then the
semantic checks the schema cannot express. Every error names the first bad field as a
JSON path. While the walker checks that each replica's dir exists it also notes what
sits on each dir (`Snapshot.replicas_by_dir`); after the decoder the model computes
that on first use, for the planners that need it.
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import msgspec

from schemas.snapshot_columns import read_columns
from schemas.snapshot_decode import decode_snapshot
from schemas.snapshot_fields import (
    ASSIGNED_FIELDS,
    BROKER_FIELDS,
    GROUP_FIELDS,
    LOG_DIR_FIELDS,
    MEMBER_FIELDS,
    MISSING,
    PARTITION_FIELDS,
    REPLICA_FIELDS,
    TOP_FIELDS,
    as_int,
    fields,
    index_of,
    shown,
)
from schemas.snapshot_types import (
    MAX_SNAPSHOT_BYTES,
    NO_LEADER,
    Assigned,
    Broker,
    ConsumerGroup,
    DirReplicas,
    LogDir,
    Member,
    Partition,
    Replica,
    Snapshot,
    SnapshotError,
)

# --- loading -------------------------------------------------------------------------


@contextmanager
def _gc_paused() -> Iterator[None]:
    # Building a few hundred thousand small acyclic objects triggers repeated full
    # collections that find nothing; pausing the collector makes loading 3x faster.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load_snapshot(source: str | Path | IO[str] | IO[bytes], columns: bool = False) -> Snapshot:
    """Read and validate a snapshot from a path or an open file ("-" is not special here).
    Past MAX_SNAPSHOT_BYTES it is refused unread (a file) or after that much (a stream).
    `columns`: the partitions may come as columns (schemas/snapshot_columns.py), for a
    planner that reads them so."""
    data: str | bytes
    if isinstance(source, (str, Path)):
        try:
            with open(source, "rb") as file:
                _refuse_past_limit(os.fstat(file.fileno()).st_size)
                data = file.read(MAX_SNAPSHOT_BYTES + 1)
        except OSError as exc:
            raise SnapshotError("$", f"cannot read {source}: {exc.strerror or exc}", "io") from exc
    else:
        data = source.read(MAX_SNAPSHOT_BYTES + 1)
    _refuse_past_limit(len(data))  # a pipe, or a file that grew while read
    return parse_snapshot(data, columns)


def _refuse_past_limit(size: int) -> None:
    if size > MAX_SNAPSHOT_BYTES:
        raise SnapshotError(
            "$",
            f"{size:,} bytes or more, past the {MAX_SNAPSHOT_BYTES:,} bytes a snapshot may be "
            "(Cruise Control's largest published cluster is ~240 MB): check that this is "
            "the cluster snapshot meant",
            "io",
        )


def _decode(text: str | bytes) -> Any:
    """msgspec's decoder (1.5-2.5x the stdlib's on a 26 MiB snapshot); on bad input the
    stdlib re-reads it, for an error that names the line and column."""
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return json.loads(text)


def parse_snapshot(text: str | bytes, columns: bool = False) -> Snapshot:
    """Parse and validate snapshot JSON text (`columns`: as `load_snapshot`)."""
    with _gc_paused():
        if columns and isinstance(text, bytes):
            found = read_columns(text)
            if found is not None:
                return found
        snapshot = decode_snapshot(text)  # the typed decoder: the common, valid case
        if snapshot is not None:
            return snapshot
        try:
            doc = _decode(text)
        except json.JSONDecodeError as exc:
            raise SnapshotError(
                "$", f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", "json"
            ) from exc
        except UnicodeDecodeError as exc:
            raise SnapshotError("$", f"not UTF-8 text: {exc.reason}", "json") from exc
        except RecursionError:
            raise SnapshotError("$", "nested too deep to be a snapshot", "json") from None
        # The decoded document is ours: let the reader drop each partition's dicts once
        # its record is built, so the memory is reused instead of the heap doubling.
        return _Reader(consume=True).snapshot(doc)


def snapshot_from_dict(doc: Any) -> Snapshot:
    """Validate a decoded snapshot document and build the records."""
    return _Reader().snapshot(doc)


class _Reader:
    """One pass over the document: structure and cross-references, in document order."""

    def __init__(self, consume: bool = False) -> None:
        self.consume = consume
        # broker -> dir path (None: unknown) -> what sits there. Replicas take the
        # broker's path string objects: less memory, hashes computed once.
        self.dirs_by_broker: dict[int, dict[str | None, DirReplicas]] = {}

    def snapshot(self, doc: Any) -> Snapshot:
        _, cluster_id, taken_at, brokers, partitions, groups, level = fields(doc, TOP_FIELDS, "$")
        first_at: dict[int, int] = {}
        broker_records: list[Broker] = []
        for i, raw in enumerate(brokers):
            broker = self.broker(raw, f"brokers[{i}]", first_at)
            first_at[broker.id] = i
            broker_records.append(broker)
        return Snapshot(
            cluster_id=cluster_id,
            taken_at=taken_at,
            metadata_level=level,
            brokers=tuple(broker_records),
            partitions=self.partitions(partitions),
            consumer_groups=tuple(
                self.group(g, f"consumer_groups[{i}]") for i, g in enumerate(groups)
            ),
            replicas_by_dir={
                (b, path): found
                for b, dirs in self.dirs_by_broker.items()
                for path, found in dirs.items()
            },
        )

    def broker(self, obj: Any, path: str, first_at: dict[int, int]) -> Broker:
        broker_id, rack, alive, raw_dirs, selector = fields(obj, BROKER_FIELDS, path)
        if broker_id in first_at:
            raise SnapshotError(
                f"{path}.id",
                f"broker {broker_id} appears twice (also brokers[{first_at[broker_id]}])",
                "consistency",
            )
        dirs: list[LogDir] = []
        seen: set[str] = set()
        for k, raw in enumerate(raw_dirs):
            where = f"{path}.log_dirs[{k}]"
            dir_path, online, total, usable, cordoned = fields(raw, LOG_DIR_FIELDS, where)
            if dir_path in seen:
                raise SnapshotError(
                    f"{where}.path",
                    f"{dir_path} appears twice on broker {broker_id}",
                    "consistency",
                )
            seen.add(dir_path)
            dirs.append(LogDir(dir_path, online, total, usable, cordoned is True))
        found: dict[str | None, DirReplicas] = {
            d.path: DirReplicas(broker_id, d.path) for d in dirs
        }
        found[None] = DirReplicas(broker_id, None)
        self.dirs_by_broker[broker_id] = found
        return Broker(broker_id, rack, alive, tuple(dirs), selector)

    def partitions(self, raw: list[Any]) -> tuple[Partition, ...]:
        # The hot loop of loading (300,000 replicas in the bench): a well-formed entry is
        # checked inline; anything unusual goes through fields, which names the bad
        # field (or accepts 3.0 as 3, as JSON Schema does). Indexes for error paths are
        # recomputed only when an error is raised.
        dirs_by_broker = self.dirs_by_broker
        consume = self.consume
        topics: dict[str, str] = {}  # one string object per topic name
        first_at: dict[tuple[str, int], int] = {}
        out: list[Partition] = []
        append = out.append
        missing = MISSING
        for i, obj in enumerate(raw):
            if (
                type(obj) is dict
                and len(obj) == 5
                and type(topic := obj.get("topic")) is str
                and topic
                and type(number := obj.get("partition")) is int
                and number >= 0
                and type(leader := obj.get("leader")) is int
                and leader >= -1
                and type(isr := obj.get("isr")) is list
                and type(raw_replicas := obj.get("replicas")) is list
            ):
                pass
            else:
                topic, number, leader, isr, raw_replicas = fields(
                    obj, PARTITION_FIELDS, f"partitions[{i}]"
                )
            topic = topics.setdefault(topic, topic)
            key = (topic, number)
            if key in first_at:
                raise SnapshotError(
                    f"partitions[{i}].partition",
                    f"{topic}-{number} appears twice (also partitions[{first_at[key]}])",
                    "consistency",
                )
            first_at[key] = i
            if not raw_replicas:
                raise SnapshotError(f"partitions[{i}].replicas", "must list at least one replica")
            brokers: list[int] = []
            replicas: list[Replica] = []
            for r in raw_replicas:
                if not (
                    type(r) is dict
                    and type(broker := r.get("broker")) is int
                    and broker >= 0
                    and type(size := r.get("size_bytes")) is int
                    and size >= 0
                    and (
                        ((log_dir := r.get("log_dir", missing)) is None and len(r) == 3)
                        or (type(log_dir) is str and log_dir and len(r) == 3)
                        or (log_dir is missing and len(r) == 2)
                    )
                ):
                    where = f"partitions[{i}].replicas[{index_of(raw_replicas, r)}]"
                    broker, log_dir, size = fields(r, REPLICA_FIELDS, where)
                dirs = dirs_by_broker.get(broker)
                if dirs is None:
                    where = f"partitions[{i}].replicas[{index_of(raw_replicas, r)}]"
                    raise SnapshotError(
                        f"{where}.broker", f"broker {broker} is not in brokers", "consistency"
                    )
                if log_dir is missing:
                    log_dir = None
                found = dirs.get(log_dir)
                if found is None:
                    where = f"partitions[{i}].replicas[{index_of(raw_replicas, r)}]"
                    raise SnapshotError(
                        f"{where}.log_dir",
                        f"{log_dir} is not a log dir of broker {broker}",
                        "consistency",
                    )
                log_dir = found.path
                found.sizes.append(size)
                found.partitions.append(i)
                if broker in brokers:
                    where = f"partitions[{i}].replicas[{index_of(raw_replicas, r)}]"
                    raise SnapshotError(
                        f"{where}.broker",
                        f"broker {broker} holds two replicas of {topic}-{number}",
                        "consistency",
                    )
                brokers.append(broker)
                replicas.append(Replica(broker, log_dir, size))
            if leader != NO_LEADER and leader not in brokers:
                raise SnapshotError(
                    f"partitions[{i}].leader",
                    f"broker {leader} is not a replica of {topic}-{number}",
                    "consistency",
                )
            for member in isr:
                if type(member) is not int or member not in brokers:
                    # Every member's type first: a schema error outranks a consistency one.
                    isr = [as_int(m, f"partitions[{i}].isr[{k}]", 0) for k, m in enumerate(isr)]
                    for k, m in enumerate(isr):
                        self.isr_member(m, brokers, f"partitions[{i}].isr[{k}]", topic, number)
                    break
            append(Partition(topic, number, leader, tuple(isr), tuple(replicas)))
            if consume:
                raw[i] = None
        return tuple(out)

    @staticmethod
    def isr_member(member: int, brokers: list[int], path: str, topic: str, number: int) -> None:
        if member not in brokers:
            raise SnapshotError(
                path, f"broker {member} is not a replica of {topic}-{number}", "consistency"
            )

    def group(self, obj: Any, path: str) -> ConsumerGroup:
        name, raw_members, kind, protocol, state, rebalance, racks = fields(obj, GROUP_FIELDS, path)
        members: list[Member] = []
        seen: set[str] = set()
        for k, raw in enumerate(raw_members):
            where = f"{path}.members[{k}]"
            member_id, instance_id, client_id, rack, topics, raw_assigned = fields(
                raw, MEMBER_FIELDS, where)
            if member_id in seen:
                raise SnapshotError(
                    f"{where}.member_id", f"{member_id} appears twice in {name}", "consistency"
                )
            seen.add(member_id)
            for t, topic in enumerate(topics):
                if type(topic) is not str or not topic:
                    raise SnapshotError(
                        f"{where}.topics[{t}]", f"expected a topic name, got {shown(topic)}"
                    )
            assigned: list[Assigned] = []
            for a, item in enumerate(raw_assigned):
                at = f"{where}.assignment[{a}]"
                topic, numbers = fields(item, ASSIGNED_FIELDS, at)
                assigned.append(Assigned(topic, tuple(
                    as_int(n, f"{at}.partitions[{k}]", 0) for k, n in enumerate(numbers))))
            members.append(Member(member_id, client_id, rack, tuple(topics), instance_id,
                                  tuple(assigned)))
        return ConsumerGroup(name, tuple(members), kind, protocol, state, rebalance,
                             racks is not False)
