"""Action ids and the one way to build an action record.

The id is a hash of (cluster, type, plan), so detecting the same problem twice proposes
the same action and the executor runs it once. Plans list partitions in the order the
planners emit them; list order is part of the plan (the first replica is the preferred
leader), so it is hashed as is and planners must emit a deterministic order.
"""

from __future__ import annotations

import hashlib
import json
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from schemas.records import Action, Receiving, Summary, Trigger
from schemas.registry import validate


class PlanLike(Protocol):
    """The planners' plan objects (core.plan.formats) have ``to_json()``."""

    def to_json(self) -> dict[str, Any]: ...


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, non-ASCII kept: the text the action id hashes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def plan_json(plan: Mapping[str, Any] | PlanLike) -> dict[str, Any]:
    """The plan as plain JSON values (tuples become lists), as it goes on the wire."""
    body = plan if isinstance(plan, Mapping) else plan.to_json()
    return typing.cast(dict[str, Any], json.loads(canonical_json(body)))


def action_id(cluster_id: str, type: str, plan: Mapping[str, Any] | PlanLike) -> str:
    """sha256 hex of the canonical JSON array ``[cluster_id, type, plan]``."""
    # One JSON array rather than joined strings: no separator can be forged by a value.
    text = canonical_json([cluster_id, type, plan_json(plan)])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _targets(reassignment: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(reassignment.get("partitions", []))


def summarise(type: str, plan: Mapping[str, Any], bytes_moved: int = 0,
              received: Iterable[Receiving] | None = None) -> Summary:
    """Partitions and brokers an action touches, read from its plan; `received`, what each
    broker copies, comes from the planner (the plan has no sizes)."""
    brokers: set[int] = set()
    if type in ("fix_offline_replicas", "move_replica_dirs"):
        targets = _targets(plan)
        partitions = len(targets)
    elif type == "rebalance_leaders":
        targets = _targets(plan.get("reassignment", {}))
        elected = plan.get("election", {}).get("partitions", [])
        partitions = len({(p["topic"], p["partition"]) for p in [*targets, *elected]})
    elif type == "assign_consumers":
        targets = []
        partitions = sum(len(tps) for tps in plan.get("assignment", {}).values())
    elif type == "page_operator":
        targets = []
        partitions = len(plan.get("partitions", []))
        brokers.update(plan.get("brokers", []))
    else:
        raise ValueError(f"unknown action type {type!r}")
    for target in targets:
        brokers.update(target["replicas"])
    got = None if received is None else tuple(sorted(received, key=lambda r: r.broker))
    return Summary(partitions=partitions, bytes=bytes_moved, brokers=tuple(sorted(brokers)),
                   received=got)


def build_action(
    cluster_id: str,
    type: str,
    plan: Mapping[str, Any] | PlanLike,
    *,
    reason: str,
    trigger: Trigger,
    event_time: str,
    bytes_moved: int = 0,
    created_at: str,
    received: Iterable[Receiving] | None = None,
) -> Action:
    """A validated action record with its id and summary; `RecordError` if it breaks the schema."""
    body = plan_json(plan)
    created = created_at
    # Validate before summarising, so a malformed plan fails with a JSON path, not a KeyError.
    draft = {
        "version": 1,
        "cluster_id": cluster_id,
        "action_id": "0" * 64,
        "type": type,
        "created_at": created,
        "event_time": event_time,
        "reason": reason,
        "trigger": {"kind": trigger.kind, "broker": trigger.broker, "log_dir": trigger.log_dir},
        "plan": body,
        "summary": {"partitions": 0, "bytes": bytes_moved, "brokers": []},
    }
    validate(Action.SCHEMA, draft)
    summary = summarise(type, body, bytes_moved, received)
    return Action(
        cluster_id=cluster_id,
        action_id=action_id(cluster_id, type, body),
        type=type,
        created_at=created,
        event_time=event_time,
        reason=reason,
        trigger=trigger,
        plan=body,
        summary=summary,
    )
