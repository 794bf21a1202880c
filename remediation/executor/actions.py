"""The action record the executor consumes from `selfheal.actions`, checked and typed.

`parse_action` is the one seam between the wire and the executor. The shape is the shared
schema's (`schemas/action.schema.json` through `schemas.registry`); on top of it the
executor checks what a schema cannot say: the action id is the hash of the record's own
content (`schemas.actions.action_id`), a replica list names each broker once, and a plan's
`log_dirs` hold one entry per replica. A record failing any of these is refused whole.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core import clock
from schemas import wire
from schemas.actions import action_id as content_id
from schemas.records import ACTION_TYPES as _TYPES
from schemas.records import TRIGGER_KINDS as _KINDS
from schemas.records import Summary, Trigger
from schemas.registry import RecordError, validate

ACTION_TYPES: frozenset[str] = frozenset(_TYPES)
TRIGGER_KINDS: frozenset[str] = frozenset(_KINDS)
REASSIGNMENT_TYPES: frozenset[str] = frozenset({"fix_offline_replicas", "move_replica_dirs"})

__all__ = ["ACTION_TYPES", "Action", "ActionError", "PartitionTarget", "Summary", "Trigger",
           "parse_action", "parse_action_json"]


class ActionError(ValueError):
    """An action record that cannot be executed as it stands; the message names the field."""


@dataclass(frozen=True, slots=True)
class PartitionTarget:
    """One entry of a kafka-reassign-partitions plan; `log_dirs` None leaves dirs unsaid."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...] | None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def dir_of(self, broker: int) -> str | None:
        """The dir the plan names for `broker`'s replica; None for "any" or unsaid."""
        if self.log_dirs is None or broker not in self.replicas:
            return None
        path = self.log_dirs[self.replicas.index(broker)]
        return None if path == "any" else path


@dataclass(frozen=True, slots=True)
class Action:
    """A checked action record; `record` is the wire record, kept for the store and replays."""

    version: int
    cluster_id: str
    action_id: str
    type: str
    created_at: datetime
    event_time: datetime
    reason: str
    trigger: Trigger
    plan: Mapping[str, Any]
    summary: Summary
    record: Mapping[str, Any]

    @property
    def is_page(self) -> bool:
        return self.type == "page_operator"

    def targets(self) -> tuple[PartitionTarget, ...]:
        """The partition targets of the plan's reassignment; empty for pages and consumers."""
        if self.type in REASSIGNMENT_TYPES:
            return _partitions(self.plan, "plan")
        if self.type == "rebalance_leaders":
            return _partitions(self.plan["reassignment"], "plan.reassignment")
        return ()

    def elections(self) -> tuple[tuple[str, int], ...]:
        """(topic, partition) of the preferred elections a leader plan asks for."""
        if self.type != "rebalance_leaders":
            return ()
        return tuple((p["topic"], p["partition"]) for p in self.plan["election"]["partitions"])

    def to_json(self) -> str:
        return json.dumps(self.record, sort_keys=True, separators=(",", ":"))


def parse_action_json(raw: bytes | str | None) -> Action:
    """`parse_action` of one Kafka value or HTTP body, through the one bounded decoder
    (`schemas.wire`): a tombstone, too big, too deep, not UTF-8, not JSON, off-schema
    are all an ActionError naming the problem, never another exception."""
    try:
        record = wire.record("action", raw)
    except RecordError as exc:
        raise ActionError(str(exc)) from None
    return parse_action(record)


def parse_action(record: Mapping[str, Any]) -> Action:
    """Check an action record and return it typed; raise ActionError naming what is wrong."""
    if not isinstance(record, Mapping):
        raise ActionError(f"action record must be a JSON object, got {type(record).__name__}")
    try:
        validate("action", record)
    except RecordError as exc:
        raise ActionError(str(exc)) from None
    plan = record["plan"]
    if record["type"] in REASSIGNMENT_TYPES:
        _partitions(plan, "plan")
    elif record["type"] == "rebalance_leaders":
        _partitions(plan["reassignment"], "plan.reassignment")
    expected = content_id(record["cluster_id"], record["type"], plan)
    if record["action_id"] != expected:
        raise ActionError(
            f"action_id: {record['action_id']} is not the hash of this record's cluster, "
            f"type and plan (that is {expected}); the record was altered after it was built, "
            "or built by hand: build it with schemas.actions.build_action"
        )
    trigger, summary = record["trigger"], record["summary"]
    return Action(
        version=record["version"],
        cluster_id=record["cluster_id"],
        action_id=record["action_id"],
        type=record["type"],
        created_at=clock.parse(record["created_at"]),
        event_time=clock.parse(record["event_time"]),
        reason=record["reason"],
        trigger=Trigger(trigger["kind"], trigger.get("broker"), trigger.get("log_dir")),
        plan=plan,
        summary=Summary(summary["partitions"], summary["bytes"], tuple(summary["brokers"])),
        record=record,
    )


def _partitions(plan: Mapping[str, Any], where: str) -> tuple[PartitionTarget, ...]:
    """A schema-valid reassignment JSON, typed, with the checks the schema cannot make."""
    out: list[PartitionTarget] = []
    for i, p in enumerate(plan["partitions"]):
        at = f"{where}.partitions[{i}]"
        replicas = tuple(p["replicas"])
        if len(set(replicas)) != len(replicas):
            raise ActionError(f"{at}.replicas: lists a broker twice: {list(replicas)}")
        dirs = p.get("log_dirs")
        if dirs is not None and len(dirs) != len(replicas):
            raise ActionError(f"{at}.log_dirs: must hold one path (or \"any\") per replica, "
                              f"{len(replicas)} here, got {dirs!r}")
        out.append(PartitionTarget(p["topic"], p["partition"], replicas,
                                   None if dirs is None else tuple(dirs)))
    return tuple(out)

