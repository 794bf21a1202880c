"""The action record the executor consumes from `selfheal.actions`, parsed and checked.

`parse_action` is the one seam between the wire and the executor: today it validates the
fields the executor needs by hand; it can later delegate to the shared schema in
`schemas/` without any caller changing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

ACTION_TYPES: frozenset[str] = frozenset(
    {"fix_offline_replicas", "move_replica_dirs", "rebalance_leaders", "assign_consumers",
     "page_operator"}
)
TRIGGER_KINDS: frozenset[str] = frozenset({"logdir_event", "metric", "snapshot", "schedule",
                                           "manual"})
REASSIGNMENT_TYPES: frozenset[str] = frozenset({"fix_offline_replicas", "move_replica_dirs"})
_ACTION_ID = re.compile(r"[0-9a-f]{64}")


class ActionError(ValueError):
    """An action record that cannot be executed as it stands; the message names the field."""


@dataclass(frozen=True, slots=True)
class Trigger:
    kind: str
    broker: int | None
    log_dir: str | None


@dataclass(frozen=True, slots=True)
class Summary:
    partitions: int
    bytes: int
    brokers: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PartitionTarget:
    """One entry of a kafka-reassign-partitions plan; `log_dirs` None leaves dirs unsaid."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class Action:
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
    record: Mapping[str, Any]  # the record as received, for the store and for replays

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

    def to_json(self) -> str:
        return json.dumps(self.record, sort_keys=True, separators=(",", ":"))


def parse_action(record: Mapping[str, Any]) -> Action:
    """Check an action record and return it typed; raise ActionError naming the bad field."""
    if not isinstance(record, Mapping):
        raise ActionError(f"action record must be a JSON object, got {type(record).__name__}")
    version = _int(record, "version", "")
    if version != 1:
        raise ActionError(f"version: this executor reads version 1 records, got {version}")
    action_id = _str(record, "action_id", "")
    if not _ACTION_ID.fullmatch(action_id):
        raise ActionError(
            f"action_id: must be 64 lowercase hex characters (a sha256), got {action_id!r}"
        )
    type_ = _str(record, "type", "")
    if type_ not in ACTION_TYPES:
        raise ActionError(f"type: unknown action type {type_!r}; known: "
                          + ", ".join(sorted(ACTION_TYPES)))
    trigger = _obj(record, "trigger", "")
    kind = _str(trigger, "kind", "trigger.")
    if kind not in TRIGGER_KINDS:
        raise ActionError(f"trigger.kind: unknown {kind!r}; known: "
                          + ", ".join(sorted(TRIGGER_KINDS)))
    summary = _obj(record, "summary", "")
    plan = _obj(record, "plan", "")
    _check_plan(type_, plan)
    return Action(
        version=version,
        cluster_id=_str(record, "cluster_id", "", nonempty=True),
        action_id=action_id,
        type=type_,
        created_at=_time(record, "created_at"),
        event_time=_time(record, "event_time"),
        reason=_str(record, "reason", ""),
        trigger=Trigger(kind, _opt_int(trigger, "broker", "trigger."),
                        _opt_str(trigger, "log_dir", "trigger.")),
        plan=plan,
        summary=Summary(
            partitions=_int(summary, "partitions", "summary.", minimum=0),
            bytes=_int(summary, "bytes", "summary.", minimum=0),
            brokers=tuple(_int_list(summary, "brokers", "summary.")),
        ),
        record=record,
    )


def _check_plan(type_: str, plan: Mapping[str, Any]) -> None:
    if type_ in REASSIGNMENT_TYPES:
        _partitions(plan, "plan")
    elif type_ == "rebalance_leaders":
        _partitions(_obj(plan, "reassignment", "plan."), "plan.reassignment")
        election = _obj(plan, "election", "plan.")
        for i, tp in enumerate(_list(election, "partitions", "plan.election.")):
            where = f"plan.election.partitions[{i}]."
            if not isinstance(tp, Mapping):
                raise ActionError(f"{where[:-1]}: must be an object with topic and partition")
            _str(tp, "topic", where, nonempty=True)
            _int(tp, "partition", where, minimum=0)
    elif type_ == "page_operator":
        _str(plan, "message", "plan.", nonempty=True)
        _int_list(plan, "brokers", "plan.")
        for i, d in enumerate(_list(plan, "log_dirs", "plan.")):
            if not isinstance(d, str):
                raise ActionError(f"plan.log_dirs[{i}]: must be a string path")
    # assign_consumers: the plan is the consumer planner's own JSON, checked by its applier.


def _partitions(plan: Mapping[str, Any], where: str) -> tuple[PartitionTarget, ...]:
    """Validate a kafka-reassign-partitions JSON (with KIP-113 log_dirs) and return it typed."""
    if _int(plan, "version", where + ".") != 1:
        raise ActionError(f"{where}.version: kafka-reassign-partitions reads version 1")
    out: list[PartitionTarget] = []
    for i, p in enumerate(_list(plan, "partitions", where + ".")):
        at = f"{where}.partitions[{i}]."
        if not isinstance(p, Mapping):
            raise ActionError(f"{at[:-1]}: must be an object with topic, partition, replicas")
        replicas = _int_list(p, "replicas", at)
        if not replicas:
            raise ActionError(f"{at}replicas: must name at least one broker")
        if len(set(replicas)) != len(replicas):
            raise ActionError(f"{at}replicas: lists a broker twice: {replicas}")
        dirs: tuple[str, ...] | None = None
        if p.get("log_dirs") is not None:
            raw = _list(p, "log_dirs", at)
            if len(raw) != len(replicas) or not all(isinstance(d, str) for d in raw):
                raise ActionError(
                    f"{at}log_dirs: must hold one path (or \"any\") per replica, "
                    f"{len(replicas)} here, got {raw!r}"
                )
            dirs = tuple(raw)
        out.append(PartitionTarget(_str(p, "topic", at, nonempty=True),
                                   _int(p, "partition", at, minimum=0), tuple(replicas), dirs))
    return tuple(out)


# --- field readers: each names the full path of what is wrong ---------------------------


def _get(obj: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in obj:
        raise ActionError(f"{where}{key}: missing")
    return obj[key]


def _str(obj: Mapping[str, Any], key: str, where: str, *, nonempty: bool = False) -> str:
    value = _get(obj, key, where)
    if not isinstance(value, str):
        raise ActionError(f"{where}{key}: must be a string, got {type(value).__name__}")
    if nonempty and not value:
        raise ActionError(f"{where}{key}: must not be empty")
    return value


def _opt_str(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    return None if obj.get(key) is None else _str(obj, key, where)


def _int(obj: Mapping[str, Any], key: str, where: str, *, minimum: int | None = None) -> int:
    value = _get(obj, key, where)
    # bool is an int in Python; a JSON true is never a count or an id.
    if not isinstance(value, int) or isinstance(value, bool):
        raise ActionError(f"{where}{key}: must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ActionError(f"{where}{key}: must be >= {minimum}, got {value}")
    return value


def _opt_int(obj: Mapping[str, Any], key: str, where: str) -> int | None:
    return None if obj.get(key) is None else _int(obj, key, where, minimum=0)


def _list(obj: Mapping[str, Any], key: str, where: str) -> Sequence[Any]:
    value = _get(obj, key, where)
    if not isinstance(value, list):
        raise ActionError(f"{where}{key}: must be a list, got {type(value).__name__}")
    return value


def _int_list(obj: Mapping[str, Any], key: str, where: str) -> list[int]:
    values = _list(obj, key, where)
    for i, v in enumerate(values):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ActionError(f"{where}{key}[{i}]: must be a broker id (integer >= 0), got {v!r}")
    return list(values)


def _obj(obj: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = _get(obj, key, where)
    if not isinstance(value, Mapping):
        raise ActionError(f"{where}{key}: must be an object, got {type(value).__name__}")
    return value


def _time(obj: Mapping[str, Any], key: str) -> datetime:
    text = _str(obj, key, "")
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ActionError(f"{key}: not an RFC 3339 time: {text!r}") from None
    if value.tzinfo is None:
        raise ActionError(f"{key}: RFC 3339 needs an offset (e.g. 'Z'), got {text!r}")
    return value
