"""The one typed action, checked once where it enters the executor.

`parse_action` is the seam between the wire and the executor. The record's shape is the
shared schema's (`schemas.records.Action.from_dict`); on top of it the executor checks
what a schema cannot say: the action id is the hash of the record's own content
(`schemas.actions.action_id`), a replica list names each broker once, and a plan's
`log_dirs` hold one entry per replica. A record failing any of these is refused whole.
What passes is `schemas.records.Action`, the type the job built: its partition targets
(`schemas.plans.PartitionAssignment`, typed once) go unchanged to the Admin call. A
stored action was checked when it was proposed and is rebuilt without a second check
(`stored_action`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from schemas import wire
from schemas.actions import action_id as content_id
from schemas.records import Action
from schemas.registry import RecordError


class ActionError(ValueError):
    """An action record that cannot be executed as it stands; the message names the field."""


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
        action = Action.from_dict(record)
    except RecordError as exc:
        raise ActionError(str(exc)) from None
    where = "plan.reassignment" if action.type == "rebalance_leaders" else "plan"
    for i, t in enumerate(action.targets()):
        at = f"{where}.partitions[{i}]"
        if len(set(t.replicas)) != len(t.replicas):
            raise ActionError(f"{at}.replicas: lists a broker twice: {list(t.replicas)}")
        if t.log_dirs is not None and len(t.log_dirs) != len(t.replicas):
            raise ActionError(f"{at}.log_dirs: must hold one path (or \"any\") per replica, "
                              f"{len(t.replicas)} here, got {list(t.log_dirs)!r}")
    expected = content_id(action.cluster_id, action.type, action.plan)
    if action.action_id != expected:
        raise ActionError(
            f"action_id: {action.action_id} is not the hash of this record's cluster, "
            f"type and plan (that is {expected}); the record was altered after it was built, "
            "or built by hand: build it with schemas.actions.build_action"
        )
    return action


def stored_action(record: Mapping[str, Any]) -> Action:
    """The action of a store row: `parse_action` passed it when it was proposed."""
    return Action.from_stored(record)
