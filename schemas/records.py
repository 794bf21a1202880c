"""Typed records for every topic, mirroring the JSON Schema files field for field.

A field the schema requires has no default (``version`` defaults to its ``const``); a field
it leaves out of ``required`` defaults to the schema's ``default`` or None. Unit tests hold
the classes and the schemas together, so they cannot drift. Times stay RFC 3339 strings,
exactly as on the wire; the records layer never reads the clock (`core.clock` makes them).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any, ClassVar, Self

from schemas import wire
from schemas.plans import PartitionAssignment, action_elections, action_targets
from schemas.registry import dumps, schema, validate


def _enum(schema_name: str, *path: str) -> tuple[str, ...]:
    node: Any = schema(schema_name)
    for part in path:
        node = node[part]
    return tuple(node["enum"])


METRICS = _enum("broker-metric", "properties", "metric")
ACTION_TYPES = _enum("action", "properties", "type")
TRIGGER_KINDS = _enum("action", "$defs", "trigger", "properties", "kind")
ACTION_STATES = _enum("action-status", "properties", "state")
LOGDIR_SOURCES = _enum("logdir-event", "properties", "source")
LOGDIR_KINDS = _enum("logdir-event", "properties", "kind")


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _from_json(hint: Any, value: Any) -> Any:
    """Turn validated JSON into the field's Python type (lists -> tuples, nested records)."""
    if value is None or hint is Any:
        return value
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return _from_json(inner, value)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        return tuple(_from_json(item, v) for v in value)
    if origin is dict:
        item = typing.get_args(hint)[1]
        return {k: _from_json(item, v) for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return _build(hint, value)
    if hint is float:
        return float(value)
    return value


def _build(cls: Any, data: Mapping[str, Any]) -> Any:
    hints = _hints(cls)
    return cls(
        **{
            f.name: _from_json(hints[f.name], data[f.name])
            for f in dataclasses.fields(cls)
            if f.name in data
        }
    )


def _to_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_json(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.init}  # init=False fields are derived, not part of the record
    if isinstance(value, (tuple, list)):
        return [_to_json(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _to_json(v) for k, v in value.items()}
    return value


class Record:
    """A top-level record: one schema, one topic, a Kafka key."""

    __slots__ = ()
    SCHEMA: ClassVar[str]
    KEY: ClassVar[str | None] = None  # the field whose value keys the Kafka record

    @classmethod
    def from_dict(cls, data: Any) -> Self:
        """Validate ``data`` against the schema (`RecordError` if bad) and build the record."""
        validate(cls.SCHEMA, data)
        return typing.cast(Self, _build(cls, data))

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> Self:
        """Build from a dict this process's store accepted before (validated then): no
        second schema check."""
        return typing.cast(Self, _build(cls, data))

    @classmethod
    def from_json(cls, raw: bytes | str | None) -> Self:
        """Parse one Kafka value through the bounded decoder (`schemas.wire`); `RecordError`
        when it is a tombstone, too big, too deep, not JSON or breaks the schema."""
        return typing.cast(Self, _build(cls, wire.record(cls.SCHEMA, raw)))

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dict (every field, None as null, schema order); not validated."""
        data = typing.cast(dict[str, Any], _to_json(self))
        return {k: data[k] for k in schema(self.SCHEMA)["properties"] if k in data}

    def to_json(self) -> bytes:
        """The validated Kafka value; `RecordError` rather than a bad record on the wire."""
        data = self.to_dict()
        validate(self.SCHEMA, data)
        return dumps(data)

    def key(self) -> bytes | None:
        """The Kafka key (compacted topics keep the latest record per key)."""
        if self.KEY is None:
            return None
        value = getattr(self, self.KEY)
        return None if value is None else str(value).encode("utf-8")


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerMetric(Record):
    """selfheal.broker-metrics; keyed by broker so one broker's samples stay in order."""

    SCHEMA: ClassVar[str] = "broker-metric"
    KEY: ClassVar[str | None] = "broker"

    cluster_id: str
    event_time: str
    broker: int
    metric: str
    value: float
    rack: str | None = None
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    version: int = 1


@dataclasses.dataclass(frozen=True, slots=True)
class LogDirEvent(Record):
    """selfheal.logdir-events; keyed by broker (unkeyed when the broker is unknown)."""

    SCHEMA: ClassVar[str] = "logdir-event"
    KEY: ClassVar[str | None] = "broker"

    cluster_id: str
    event_time: str
    source: str
    kind: str
    broker: int | None = None
    log_dir: str | None = None
    znode: str | None = None
    details: str | None = None
    version: int = 1


@dataclasses.dataclass(frozen=True, slots=True)
class Trigger:
    """What made the detector propose an action."""

    kind: str
    broker: int | None = None
    log_dir: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Receiving:
    """What one broker copies in a re-replication."""

    broker: int
    bytes: int
    replicas: int


@dataclasses.dataclass(frozen=True, slots=True)
class Summary:
    """How big an action is, for the approval page and the policy."""

    partitions: int
    bytes: int
    brokers: tuple[int, ...]
    received: tuple[Receiving, ...] | None = None  # a re-replication's, per broker


@dataclasses.dataclass(frozen=True, slots=True)
class Action(Record):
    """selfheal.actions, keyed by action_id; build one with `schemas.actions.build_action`."""

    SCHEMA: ClassVar[str] = "action"
    KEY: ClassVar[str | None] = "action_id"

    cluster_id: str
    action_id: str
    type: str
    created_at: str
    event_time: str
    reason: str
    trigger: Trigger
    plan: dict[str, Any]
    summary: Summary
    version: int = 1
    signature: str | None = None
    # The plan's partition targets and elections, typed on first use and kept: the
    # executor reads them at every step of a plan of up to millions of replicas.
    _targets: tuple[PartitionAssignment, ...] | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False)
    _elections: tuple[tuple[str, int], ...] | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """As every record, less ``signature`` while unsigned (it is not part of the
        content the signature covers)."""
        data = Record.to_dict(self)
        if data.get("signature") is None:
            data.pop("signature", None)
        return data

    @property
    def is_page(self) -> bool:
        return self.type == "page_operator"

    def targets(self) -> tuple[PartitionAssignment, ...]:
        """The partition targets of the plan; none for pages and consumer assignments."""
        if self._targets is None:
            object.__setattr__(self, "_targets", action_targets(self.type, self.plan))
        assert self._targets is not None
        return self._targets

    def elections(self) -> tuple[tuple[str, int], ...]:
        """(topic, partition) of the preferred elections a leader plan asks for."""
        if self._elections is None:
            object.__setattr__(self, "_elections", action_elections(self.type, self.plan))
        assert self._elections is not None
        return self._elections


@dataclasses.dataclass(frozen=True, slots=True)
class ActionStatus(Record):
    """selfheal.action-status, compacted, keyed by action_id."""

    SCHEMA: ClassVar[str] = "action-status"
    KEY: ClassVar[str | None] = "action_id"

    cluster_id: str
    action_id: str
    state: str
    event_time: str
    reason: str | None = None
    actor: str | None = None
    version: int = 1


@dataclasses.dataclass(frozen=True, slots=True)
class AssignedPartition:
    topic: str
    partition: int


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerAssignment(Record):
    """selfheal.consumer-assignments, compacted, keyed by group."""

    SCHEMA: ClassVar[str] = "consumer-assignment"
    KEY: ClassVar[str | None] = "group"

    cluster_id: str
    event_time: str
    group: str
    strategy: str
    assignment: dict[str, tuple[AssignedPartition, ...]]
    cross_rack: int
    members: tuple[str, ...] | None = None
    version: int = 1

    def membership(self) -> frozenset[str]:
        """The member ids the target was planned for: ``members`` when the record carries
        it, else the assignment's keys (records written before the field existed; the
        planners list every member there, those given nothing too)."""
        return frozenset(self.assignment if self.members is None else self.members)


# Dead letters carry the raw value; one that big (a rejected snapshot, a poisoned record)
# would not fit in a record of the dead-letter topic, and the whole value stays where it was.
RAW_LIMIT = 256 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class DeadLetter(Record):
    """selfheal.dead-letter; ``raw`` is the value as UTF-8 with bad bytes replaced."""

    SCHEMA: ClassVar[str] = "dead-letter"
    KEY: ClassVar[str | None] = "source_topic"

    event_time: str
    source_topic: str
    reason: str
    raw: str
    cluster_id: str | None = None
    source_partition: int | None = None
    source_offset: int | None = None
    version: int = 1

    @classmethod
    def reject(
        cls,
        raw: bytes | str | None,
        reason: str | Exception,
        source_topic: str,
        source_partition: int | None = None,
        source_offset: int | None = None,
        cluster_id: str | None = None,
        *,
        event_time: str,
    ) -> DeadLetter:
        """The dead letter for a value that failed parsing or validation.

        A huge value keeps its first `RAW_LIMIT` bytes (the dead-letter topic takes records
        of a few hundred KiB); the reason then says where the whole record stays.
        """
        data = raw if isinstance(raw, bytes) else (raw or "").encode("utf-8", "replace")
        why = str(reason)
        if len(data) > RAW_LIMIT:
            where = f"{source_topic}[{source_partition}]@{source_offset}"
            why += (f"; raw holds the first {RAW_LIMIT} of {len(data)} bytes, the whole "
                    f"record is at {where}")
            data = data[:RAW_LIMIT]
        text = data.decode("utf-8", errors="replace")
        return cls(
            event_time=event_time,
            source_topic=source_topic,
            reason=why,
            raw=text,
            cluster_id=cluster_id or None,
            source_partition=source_partition,
            source_offset=source_offset,
        )


# Schema name -> record class; the cluster snapshot has its own types in schemas.snapshot.
RECORD_TYPES: dict[str, type[Record]] = {
    cls.SCHEMA: cls
    for cls in (BrokerMetric, LogDirEvent, Action, ActionStatus, ConsumerAssignment, DeadLetter)
}
