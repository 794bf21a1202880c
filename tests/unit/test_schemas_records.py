"""The record dataclasses mirror the schema files exactly, and round-trip the wire."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from core import clock
from schemas import registry
from schemas.records import (
    RECORD_TYPES,
    Action,
    BrokerMetric,
    ConsumerAssignment,
    DeadLetter,
    LogDirEvent,
)
from schemas.registry import RecordError, json_types, resolve


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        args = typing.get_args(hint)
        (inner,) = [a for a in args if a is not type(None)]
        return inner, type(None) in args
    return hint, False


def _nested(hint: Any, prop: Mapping[str, Any], root: Mapping[str, Any]):
    """(dataclass, its schema node) pairs reachable from one field."""
    prop = resolve(prop, root)
    origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint):
        yield hint, prop
    elif origin is tuple:
        yield from _nested(typing.get_args(hint)[0], prop["items"], root)
    elif origin is dict and typing.get_args(hint)[1] is not Any:
        yield from _nested(typing.get_args(hint)[1], prop["additionalProperties"], root)


def assert_mirrors(cls: type, node: Mapping[str, Any], root: Mapping[str, Any]) -> None:
    node = resolve(node, root)
    props, required = node["properties"], set(node.get("required", ()))
    # init=False fields are derived caches (Action's typed targets), never on the wire.
    derived = [f.name for f in dataclasses.fields(cls) if not f.init]
    assert all(name.startswith("_") for name in derived), derived
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    assert set(fields) == set(props), cls.__name__
    hints = typing.get_type_hints(cls)
    for name, f in fields.items():
        prop = resolve(props[name], root)
        has_default = (f.default is not dataclasses.MISSING
                       or f.default_factory is not dataclasses.MISSING)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        where = f"{cls.__name__}.{name}"
        if name in required:
            # Only a const (the version) may have a default; the rest must be given.
            assert has_default == ("const" in prop), where
            if has_default:
                assert default == prop["const"], where
        else:
            assert has_default and default == prop.get("default"), where
        inner, optional = _unwrap_optional(hints[name])
        assert optional == ("null" in json_types(prop)), where
        for sub_cls, sub_node in _nested(inner, prop, root):
            assert_mirrors(sub_cls, sub_node, root)


def test_every_record_schema_has_a_record_type():
    # The snapshot, its chunks and a failure's delta are typed in schemas/snapshot_types.py,
    # schemas/snapshot_chunks.py and schemas/snapshot_delta.py (tests/unit/
    # test_snapshot_chunks.py and test_snapshot_delta.py hold those).
    assert set(RECORD_TYPES) == set(registry.names()) - {
        "cluster-snapshot", "cluster-snapshot-chunk", "cluster-snapshot-manifest",
        "cluster-snapshot-delta"}


@pytest.mark.parametrize("name", sorted(RECORD_TYPES))
def test_dataclass_fields_and_required_match_the_schema(name):
    root = registry.schema(name)
    assert_mirrors(RECORD_TYPES[name], root, root)


@pytest.mark.parametrize("name", sorted(RECORD_TYPES))
def test_examples_round_trip_through_the_dataclass(name):
    cls = RECORD_TYPES[name]
    for doc in registry.schema(name)["examples"]:
        record = cls.from_dict(doc)
        assert record.to_dict() == doc
        assert list(record.to_dict()) == list(registry.schema(name)["properties"])
        assert cls.from_json(record.to_json()) == record


def test_from_dict_validates():
    doc = registry.schema("broker-metric")["examples"][0] | {"value": -1}
    with pytest.raises(RecordError, match="^value: -1 is less than the minimum of 0"):
        BrokerMetric.from_dict(doc)


def test_to_json_refuses_to_put_a_bad_record_on_the_wire():
    bad = LogDirEvent(cluster_id="c1", event_time=clock.text(), source="zookeeper",
                      kind="disk_on_fire")
    with pytest.raises(RecordError, match="^kind: 'disk_on_fire' is not one of"):
        bad.to_json()


def test_optional_fields_may_be_left_out_and_default():
    doc = {"version": 1, "cluster_id": "c1", "event_time": "2026-11-22T03:00:00Z",
           "source": "zookeeper", "kind": "log_dir_failure"}
    event = LogDirEvent.from_dict(doc)
    assert (event.broker, event.log_dir, event.znode, event.details) == (None,) * 4
    assert event.key() is None


def test_nested_values_become_tuples_and_records():
    record = ConsumerAssignment.from_dict(registry.schema("consumer-assignment")["examples"][0])
    first = record.assignment["consumer-1-3f2a"]
    assert isinstance(first, tuple)
    assert (first[1].topic, first[1].partition) == ("orders", 1)
    assert record.key() == b"billing"


def test_integer_values_read_as_floats():
    doc = registry.schema("broker-metric")["examples"][0]
    assert BrokerMetric.from_dict(doc).value == 1.0
    assert isinstance(BrokerMetric.from_dict(doc).value, float)


def test_actions_are_keyed_by_their_id():
    doc = registry.schema("action")["examples"][0]
    assert Action.from_dict(doc).key() == doc["action_id"].encode()


def test_dead_letters_keep_undecodable_bytes_readable():
    letter = DeadLetter.reject(b'{"value": \xff}', RecordError("x", "$", "not UTF-8 text"),
                               "selfheal.broker-metrics", 2, 17,
                               event_time="2026-11-22T02:05:06.789Z")
    assert letter.raw == '{"value": \ufffd}'
    assert letter.reason.startswith("$: not UTF-8 text")
    assert DeadLetter.from_json(letter.to_json()) == letter


def test_the_clock_writes_utc_with_milliseconds_and_a_z():
    when = datetime(2026, 11, 22, 4, 5, 6, 789999, tzinfo=timezone(timedelta(hours=2)))
    assert clock.text(when) == "2026-11-22T02:05:06.789Z"
    assert registry.is_rfc3339(clock.text())
