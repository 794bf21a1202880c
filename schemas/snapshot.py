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

from schemas.snapshot_decode import decode_snapshot
from schemas.snapshot_types import (
    MAX_SNAPSHOT_BYTES,
    NO_LEADER,
    SNAPSHOT_VERSION,
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


def load_snapshot(source: str | Path | IO[str] | IO[bytes]) -> Snapshot:
    """Read and validate a snapshot from a path or an open file ("-" is not special here).
    Past MAX_SNAPSHOT_BYTES it is refused unread (a file) or after that much (a stream)."""
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
    return parse_snapshot(data)


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


def parse_snapshot(text: str | bytes) -> Snapshot:
    """Parse and validate snapshot JSON text."""
    with _gc_paused():
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


# --- checks --------------------------------------------------------------------------

# A field: (name, kind, required, nullable, minimum). `minimum` is a number for integers
# and a minimum length for strings.
_Field = tuple[str, str, bool, bool, int | None]

_TOP: tuple[_Field, ...] = (
    ("version", "version", True, False, None),
    ("cluster_id", "str", True, False, 1),
    ("taken_at", "str", True, False, None),
    ("brokers", "list", True, False, None),
    ("partitions", "list", True, False, None),
    ("consumer_groups", "list", False, False, None),
    ("metadata_level", "int", False, True, 0),
)
_BROKER: tuple[_Field, ...] = (
    ("id", "int", True, False, 0),
    ("rack", "str", False, True, 1),
    ("alive", "bool", True, False, None),
    ("log_dirs", "list", True, False, None),
    ("replica_selector", "str", False, True, 1),
)
_LOG_DIR: tuple[_Field, ...] = (
    ("path", "str", True, False, 1),
    ("online", "bool", True, False, None),
    ("total_bytes", "int", False, True, 0),
    ("usable_bytes", "int", False, True, 0),
    ("cordoned", "bool", False, False, None),
)
_PARTITION: tuple[_Field, ...] = (
    ("topic", "str", True, False, 1),
    ("partition", "int", True, False, 0),
    ("leader", "int", True, False, -1),
    ("isr", "list", True, False, None),
    ("replicas", "list", True, False, None),
)
_REPLICA: tuple[_Field, ...] = (
    ("broker", "int", True, False, 0),
    ("log_dir", "str", False, True, 1),
    ("size_bytes", "int", True, False, 0),
)
_GROUP: tuple[_Field, ...] = (
    ("group", "str", True, False, 1),
    ("members", "list", True, False, None),
    ("protocol_type", "str", False, True, None),
    ("protocol", "str", False, True, None),
    ("state", "str", False, True, None),
    ("group_protocol", "str", False, True, 1),
    ("racks_known", "bool", False, False, None),
)
_MEMBER: tuple[_Field, ...] = (
    ("member_id", "str", True, False, 1),
    ("group_instance_id", "str", False, True, 1),
    ("client_id", "str", True, False, 0),
    ("rack", "str", False, True, 1),
    ("topics", "list", True, False, None),
    ("assignment", "list", False, False, None),
)
_ASSIGNED: tuple[_Field, ...] = (
    ("topic", "str", True, False, 1),
    ("partitions", "list", True, False, None),
)


_MISSING: Any = object()


def _index_of(items: list[Any], item: Any) -> int:
    return next(k for k, x in enumerate(items) if x is item)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, (dict, list)) else _json_type(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _as_int(value: Any, path: str, minimum: int | None) -> int:
    # JSON Schema's "integer" accepts 3.0; booleans are not integers.
    if type(value) is float and value.is_integer():
        value = int(value)
    if type(value) is not int:
        raise SnapshotError(path, f"expected an integer, got {_shown(value)}")
    if minimum is not None and value < minimum:
        raise SnapshotError(path, f"expected an integer >= {minimum}, got {value}")
    return value


def _fields(obj: Any, spec: tuple[_Field, ...], path: str) -> list[Any]:
    """Check one object against its field spec; return the values in spec order."""
    if type(obj) is not dict:
        raise SnapshotError(path, f"expected an object, got {_json_type(obj)}")
    values: list[Any] = []
    for name, kind, required, nullable, minimum in spec:
        where = f"{path}.{name}" if path != "$" else name
        if name not in obj:
            if required:
                raise SnapshotError(where, "required field is missing")
            values.append(None if nullable or kind != "list" else [])
            continue
        value = obj[name]
        if value is None and nullable:
            values.append(None)
        elif kind == "int":
            values.append(_as_int(value, where, minimum))
        elif kind == "str":
            if type(value) is not str:
                raise SnapshotError(where, f"expected a string, got {_shown(value)}")
            if minimum and len(value) < minimum:
                raise SnapshotError(where, "must not be empty")
            values.append(value)
        elif kind == "bool":
            if type(value) is not bool:
                raise SnapshotError(where, f"expected true or false, got {_shown(value)}")
            values.append(value)
        elif kind == "list":
            if type(value) is not list:
                raise SnapshotError(where, f"expected an array, got {_json_type(value)}")
            values.append(value)
        elif kind == "version":
            if _json_type(value) != "integer" or value != SNAPSHOT_VERSION:
                raise SnapshotError(
                    where,
                    f"unsupported snapshot version {_shown(value)}; this reader knows "
                    f"version {SNAPSHOT_VERSION}",
                )
            values.append(value)
    if len(obj) > sum(1 for f in spec if f[0] in obj):
        known = [f[0] for f in spec]
        extra = next(k for k in obj if k not in known)
        where = f"{path}.{extra}" if path != "$" else str(extra)
        raise SnapshotError(where, f"unknown field; expected one of {', '.join(known)}")
    return values


class _Reader:
    """One pass over the document: structure and cross-references, in document order."""

    def __init__(self, consume: bool = False) -> None:
        self.consume = consume
        # broker -> dir path (None: unknown) -> what sits there. Replicas take the
        # broker's path string objects: less memory, hashes computed once.
        self.dirs_by_broker: dict[int, dict[str | None, DirReplicas]] = {}

    def snapshot(self, doc: Any) -> Snapshot:
        _, cluster_id, taken_at, brokers, partitions, groups, level = _fields(doc, _TOP, "$")
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
        broker_id, rack, alive, raw_dirs, selector = _fields(obj, _BROKER, path)
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
            dir_path, online, total, usable, cordoned = _fields(raw, _LOG_DIR, where)
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
        # checked inline; anything unusual goes through _fields, which names the bad
        # field (or accepts 3.0 as 3, as JSON Schema does). Indexes for error paths are
        # recomputed only when an error is raised.
        dirs_by_broker = self.dirs_by_broker
        consume = self.consume
        topics: dict[str, str] = {}  # one string object per topic name
        first_at: dict[tuple[str, int], int] = {}
        out: list[Partition] = []
        append = out.append
        missing = _MISSING
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
                topic, number, leader, isr, raw_replicas = _fields(
                    obj, _PARTITION, f"partitions[{i}]"
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
                    where = f"partitions[{i}].replicas[{_index_of(raw_replicas, r)}]"
                    broker, log_dir, size = _fields(r, _REPLICA, where)
                dirs = dirs_by_broker.get(broker)
                if dirs is None:
                    where = f"partitions[{i}].replicas[{_index_of(raw_replicas, r)}]"
                    raise SnapshotError(
                        f"{where}.broker", f"broker {broker} is not in brokers", "consistency"
                    )
                if log_dir is missing:
                    log_dir = None
                found = dirs.get(log_dir)
                if found is None:
                    where = f"partitions[{i}].replicas[{_index_of(raw_replicas, r)}]"
                    raise SnapshotError(
                        f"{where}.log_dir",
                        f"{log_dir} is not a log dir of broker {broker}",
                        "consistency",
                    )
                log_dir = found.path
                found.sizes.append(size)
                found.partitions.append(i)
                if broker in brokers:
                    where = f"partitions[{i}].replicas[{_index_of(raw_replicas, r)}]"
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
                    isr = [_as_int(m, f"partitions[{i}].isr[{k}]", 0) for k, m in enumerate(isr)]
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
        name, raw_members, kind, protocol, state, rebalance, racks = _fields(obj, _GROUP, path)
        members: list[Member] = []
        seen: set[str] = set()
        for k, raw in enumerate(raw_members):
            where = f"{path}.members[{k}]"
            member_id, instance_id, client_id, rack, topics, raw_assigned = _fields(
                raw, _MEMBER, where)
            if member_id in seen:
                raise SnapshotError(
                    f"{where}.member_id", f"{member_id} appears twice in {name}", "consistency"
                )
            seen.add(member_id)
            for t, topic in enumerate(topics):
                if type(topic) is not str or not topic:
                    raise SnapshotError(
                        f"{where}.topics[{t}]", f"expected a topic name, got {_shown(topic)}"
                    )
            assigned: list[Assigned] = []
            for a, item in enumerate(raw_assigned):
                at = f"{where}.assignment[{a}]"
                topic, numbers = _fields(item, _ASSIGNED, at)
                assigned.append(Assigned(topic, tuple(
                    _as_int(n, f"{at}.partitions[{k}]", 0) for k, n in enumerate(numbers))))
            members.append(Member(member_id, client_id, rack, tuple(topics), instance_id,
                                  tuple(assigned)))
        return ConsumerGroup(name, tuple(members), kind, protocol, state, rebalance,
                             racks is not False)
