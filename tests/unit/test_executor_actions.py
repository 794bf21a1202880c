"""parse_action: a good record comes back typed; a bad one is refused naming the field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core import clock
from remediation.executor.actions import (
    ActionError,
    parse_action,
    parse_action_json,
    stored_action,
)
from schemas.plans import PartitionAssignment
from tests.unit.action_records import fix_offline, of_type


@pytest.mark.parametrize("type_", ["fix_offline_replicas", "move_replica_dirs",
                                   "rebalance_leaders", "assign_consumers", "page_operator"])
def test_every_action_type_parses(type_: str) -> None:
    action = parse_action(of_type(type_))
    assert action.type == type_
    assert action.cluster_id == "c1"
    assert clock.parse(action.created_at).tzinfo is not None


def test_a_reassignment_plan_reads_as_partition_targets() -> None:
    action = parse_action(fix_offline(partitions=2))
    assert action.trigger.broker == 3 and action.trigger.log_dir == "/data/d2"
    assert action.targets() == (
        PartitionAssignment("orders", 0, (1, 2, 4), ("any", "any", "/data/d1")),
        PartitionAssignment("orders", 1, (1, 2, 4), ("any", "any", "/data/d1")),
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
    ("action_id", "abc", r"action_id: 'abc' does not match"),
    ("type", "reboot_broker", "type: 'reboot_broker' is not one of"),
    ("version", 2, "version: 1 was expected"),
    ("created_at", "yesterday", "created_at: 'yesterday' is not a 'date-time'"),
    ("created_at", "2026-11-22T03:00:00", "created_at: '2026-11-22T03:00:00' is not a 'date-time'"),
    ("trigger.kind", "psychic", "trigger.kind: 'psychic' is not one of"),
    ("trigger.broker", True, "trigger.broker: True is not of type 'integer'"),
    ("summary.bytes", -1, "summary.bytes: -1 is less than the minimum of 0"),
    ("cluster_id", KeyError, "cluster_id: required field is missing"),
    ("plan.partitions.0.replicas", [1, 1, 2], r"plan.partitions\[0\].replicas: lists a broker"),
    ("plan.partitions.0.log_dirs", ["any"], r"plan.partitions\[0\].log_dirs: must hold one path"),
    ("plan.partitions.0.topic", "", r"plan.partitions\[0\].topic: '' should be non-empty"),
])
def test_a_bad_field_is_named_in_the_error(path: str, value: Any, message: str) -> None:
    with pytest.raises(ActionError, match=message):
        parse_action(_broken(path, value))


def test_a_page_needs_a_message() -> None:
    record = of_type("page_operator")
    del record["plan"]["message"]
    with pytest.raises(ActionError, match="plan.message: required field is missing"):
        parse_action(record)


def test_a_non_object_is_refused() -> None:
    with pytest.raises(ActionError, match="must be a JSON object, got list"):
        parse_action([])  # type: ignore[arg-type]


def test_the_schema_error_says_which_schema_to_match() -> None:
    with pytest.raises(ActionError, match=r"schemas/action.schema.json"):
        parse_action(_broken("type", "reboot_broker"))


def test_an_id_that_is_not_the_hash_of_the_content_is_refused() -> None:
    record = fix_offline()
    record["plan"]["partitions"][0]["replicas"] = [1, 2, 5]  # altered after it was built
    with pytest.raises(ActionError, match="is not the hash of this record's cluster, type and"):
        parse_action(record)


def test_the_reason_and_trigger_are_not_part_of_the_id() -> None:
    # The same target state found by another detector is the same action.
    a = parse_action(fix_offline())
    b = parse_action(fix_offline(reason="seen in a snapshot",
                                 trigger={"kind": "snapshot", "broker": None, "log_dir": None}))
    assert a.action_id == b.action_id


def test_a_target_names_the_dir_of_each_replica() -> None:
    (target,) = parse_action(fix_offline()).targets()
    assert (target.dir_of(4), target.dir_of(1), target.dir_of(9)) == ("/data/d1", None, None)
    assert target.name == "orders-0"


def test_a_leader_plan_lists_its_elections() -> None:
    action = parse_action(of_type("rebalance_leaders"))
    assert action.elections() == (("orders", 0),)
    assert parse_action(fix_offline()).elections() == ()


def test_a_value_that_is_not_json_is_named_at_the_root() -> None:
    with pytest.raises(ActionError, match=r"^\$: not JSON: JSON is malformed: object keys "
                                          r"must be strings \(byte 1\)"):
        parse_action_json(b"{not json")
    with pytest.raises(ActionError, match=r"^\$: not UTF-8 text"):
        parse_action_json(b"\xff")
    assert parse_action_json(json.dumps(fix_offline())).type == "fix_offline_replicas"


def test_the_targets_are_typed_once_and_a_stored_action_is_not_checked_again() -> None:
    action = parse_action(fix_offline(partitions=3))
    assert action.targets() is action.targets()  # read once, kept
    stored = stored_action(action.to_dict())
    assert stored == action and stored.targets() == action.targets()
    altered = {**action.to_dict(), "action_id": "0" * 64}
    assert stored_action(altered).action_id == "0" * 64  # the store's rows were checked
    with pytest.raises(ActionError, match="is not the hash"):
        parse_action(altered)
