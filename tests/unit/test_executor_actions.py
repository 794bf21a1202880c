"""parse_action: a good record comes back typed; a bad one is refused naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from remediation.executor.actions import ActionError, PartitionTarget, parse_action
from tests.unit.action_records import fix_offline, of_type


@pytest.mark.parametrize("type_", ["fix_offline_replicas", "move_replica_dirs",
                                   "rebalance_leaders", "assign_consumers", "page_operator"])
def test_every_action_type_parses(type_: str) -> None:
    action = parse_action(of_type(type_))
    assert action.type == type_
    assert action.cluster_id == "c1"
    assert action.created_at.tzinfo is not None


def test_a_reassignment_plan_reads_as_partition_targets() -> None:
    action = parse_action(fix_offline(partitions=2))
    assert action.trigger.broker == 3 and action.trigger.log_dir == "/data/d2"
    assert action.targets() == (
        PartitionTarget("orders", 0, (1, 2, 4), ("any", "any", "/data/d1")),
        PartitionTarget("orders", 1, (1, 2, 4), ("any", "any", "/data/d1")),
    )


def _broken(path: str, value: Any) -> dict[str, Any]:
    record = fix_offline()
    *parents, last = path.split(".")
    obj: Any = record
    for key in parents:
        obj = obj[int(key)] if isinstance(obj, list) else obj[key]
    if value is KeyError:
        del obj[last]
    else:
        obj[last] = value
    return record


@pytest.mark.parametrize("path,value,message", [
    ("action_id", "abc", "action_id: must be 64 lowercase hex"),
    ("type", "reboot_broker", "type: unknown action type 'reboot_broker'"),
    ("version", 2, "version: this executor reads version 1"),
    ("created_at", "yesterday", "created_at: not an RFC 3339 time"),
    ("created_at", "2026-11-22T03:00:00", "created_at: RFC 3339 needs an offset"),
    ("trigger.kind", "psychic", "trigger.kind: unknown 'psychic'"),
    ("trigger.broker", True, "trigger.broker: must be an integer"),
    ("summary.bytes", -1, "summary.bytes: must be >= 0"),
    ("cluster_id", KeyError, "cluster_id: missing"),
    ("plan.partitions.0.replicas", [1, 1, 2], r"plan.partitions\[0\].replicas: lists a broker"),
    ("plan.partitions.0.log_dirs", ["any"], r"plan.partitions\[0\].log_dirs: must hold one path"),
    ("plan.partitions.0.topic", "", r"plan.partitions\[0\].topic: must not be empty"),
])
def test_a_bad_field_is_named_in_the_error(path: str, value: Any, message: str) -> None:
    with pytest.raises(ActionError, match=message):
        parse_action(_broken(path, value))


def test_a_page_needs_a_message() -> None:
    record = of_type("page_operator")
    del record["plan"]["message"]
    with pytest.raises(ActionError, match="plan.message: missing"):
        parse_action(record)


def test_a_non_object_is_refused() -> None:
    with pytest.raises(ActionError, match="must be a JSON object, got list"):
        parse_action([])  # type: ignore[arg-type]
