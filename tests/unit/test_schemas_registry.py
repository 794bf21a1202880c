"""The schema files and `schemas.registry`: loading, topics, validation errors."""

from __future__ import annotations

import copy

import pytest
from jsonschema import Draft202012Validator

from schemas import registry
from schemas.registry import TOPIC_SCHEMAS, RecordError, is_rfc3339, validate
from tests.unit.action_records import of_type

OWN = ("broker-metric", "logdir-event", "action", "action-status", "consumer-assignment",
       "dead-letter")


def example(name: str) -> dict:
    return copy.deepcopy(registry.schema(name)["examples"][0])


@pytest.mark.parametrize("name", registry.names())
def test_every_schema_file_is_valid_draft_2020_12(name):
    doc = registry.schema(name)
    assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(doc)


@pytest.mark.parametrize("name", OWN)
def test_every_record_carries_version_cluster_and_event_time(name):
    props = registry.schema(name)["properties"]
    assert props["version"]["const"] == 1
    assert "cluster_id" in props
    assert props["event_time"]["format"] == "date-time"


@pytest.mark.parametrize("name", OWN)
def test_the_documented_examples_are_valid(name):
    examples = registry.schema(name)["examples"]
    assert examples
    for doc in examples:
        validate(name, doc)


def test_topics_map_to_schemas_with_the_default_prefix():
    assert TOPIC_SCHEMAS == {
        "selfheal.broker-metrics": "broker-metric",
        "selfheal.logdir-events": "logdir-event",
        "selfheal.cluster-snapshots": "cluster-snapshot",
        "selfheal.actions": "action",
        "selfheal.action-status": "action-status",
        "selfheal.consumer-assignments": "consumer-assignment",
        "selfheal.dead-letter": "dead-letter",
    }
    assert registry.topic_schemas("prod.")["prod.actions"] == "action"


def test_a_negative_value_names_the_field_and_what_to_do():
    doc = example("broker-metric") | {"value": -1}
    with pytest.raises(RecordError) as err:
        validate("broker-metric", doc)
    assert str(err.value).startswith("value: -1 is less than the minimum of 0")
    assert "schemas/broker-metric.schema.json" in str(err.value)
    assert (err.value.path, err.value.schema) == ("value", "broker-metric")
    assert isinstance(err.value, ValueError)


def test_a_missing_field_is_named_itself():
    doc = example("logdir-event")
    del doc["kind"]
    with pytest.raises(RecordError, match=r"^kind: required field is missing"):
        validate("logdir-event", doc)


def test_an_unknown_field_is_named_and_the_allowed_ones_listed():
    doc = example("action-status") | {"actor_name": "bob"}
    with pytest.raises(RecordError, match=r"^actor_name: unknown field; allowed: version,"):
        validate("action-status", doc)


def test_nested_errors_carry_a_json_path_with_indexes():
    doc = example("consumer-assignment")
    doc["assignment"]["consumer-1-3f2a"][1]["partition"] = -2
    with pytest.raises(RecordError) as err:
        validate("consumer-assignment", doc)
    assert err.value.path == "assignment.consumer-1-3f2a[1].partition"


def test_a_metric_outside_the_exporter_rules_is_rejected():
    doc = example("broker-metric") | {"metric": "kafka_log_logendoffset"}
    with pytest.raises(RecordError, match=r"^metric: 'kafka_log_logendoffset' is not one of"):
        validate("broker-metric", doc)


def test_a_boolean_is_not_a_broker_id():
    with pytest.raises(RecordError, match=r"^broker: True is not of type 'integer'"):
        validate("broker-metric", example("broker-metric") | {"broker": True})


@pytest.mark.parametrize("value,ok", [
    ("2026-11-22T03:50:54Z", True),
    ("2026-11-22T03:50:54.123456789+01:00", True),
    ("2026-11-22t03:50:54z", True),
    ("2026-11-22T03:50:54", False),  # no offset: the reader's zone would decide
    ("2026-11-22 03:50:54Z", False),
    ("2026-02-30T00:00:00Z", False),
    ("1732247454", False),
])
def test_event_times_must_be_rfc3339_with_an_offset(value, ok):
    assert is_rfc3339(value) is ok
    doc = example("action-status") | {"event_time": value}
    assert registry.is_valid("action-status", doc) is ok


def test_the_action_plan_must_have_its_types_shape():
    doc = of_type("page_operator")
    doc["plan"] = of_type("fix_offline_replicas")["plan"]
    with pytest.raises(RecordError, match=r"^plan\.message: required field is missing"):
        validate("action", doc)


def test_a_reassignment_needs_at_least_one_replica_per_partition():
    doc = of_type("move_replica_dirs")
    doc["plan"]["partitions"][0]["replicas"] = []
    with pytest.raises(RecordError) as err:
        validate("action", doc)
    assert err.value.path == "plan.partitions[0].replicas"


@pytest.mark.parametrize("type_", ["fix_offline_replicas", "move_replica_dirs",
                                   "rebalance_leaders", "assign_consumers", "page_operator"])
def test_the_executors_fixture_actions_match_the_schema(type_):
    validate("action", of_type(type_))


def test_unknown_schema_names_the_known_ones():
    with pytest.raises(KeyError, match="known: action-status, action"):
        registry.schema("actions")
