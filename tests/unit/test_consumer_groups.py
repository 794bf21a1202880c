"""Consumer groups in the snapshot: the records, the DescribeGroups reader's mapping, rack
locality (core/locality.py) and its gauges."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from core.groups import group_record, member_record, read_groups
from core.locality import diagnose, locality, planned_locality, strategy_for
from core.plan.formats import TopicPartition
from schemas.snapshot import SnapshotError, parse_snapshot, snapshot_from_dict
from schemas.snapshot_decode import decode_snapshot
from schemas.snapshot_types import RACK_AWARE_SELECTOR, Assigned
from streams.collect.placement_metrics import PlacementMetrics
from tests.unit.plan_snapshots import GIB, broker, doc, model, partition
from tests.unit.test_plan_snapshot import EXAMPLE, VALIDATOR, agree, json_values, mutate, paths

GROUP = {
    "group": "g",
    "protocol_type": "consumer",
    "protocol": "range",
    "state": "Stable",
    "group_protocol": "classic",
    "racks_known": True,
    "members": [
        {"member_id": "m1", "client_id": "c", "rack": "r1", "topics": ["t"],
         "assignment": [{"topic": "t", "partitions": [0, 1]}]},
        {"member_id": "m2", "client_id": "c", "group_instance_id": "i2", "rack": None,
         "topics": ["t"], "assignment": []},
    ],
}


def with_groups() -> dict[str, Any]:
    out = copy.deepcopy(EXAMPLE)
    out["consumer_groups"] = [copy.deepcopy(GROUP)]
    out["brokers"][0]["replica_selector"] = RACK_AWARE_SELECTOR
    out["partitions"][1]["replicas"][0]["log_dir"] = None  # as the collectors write it
    return out


# --- the records ----------------------------------------------------------------------


def test_group_fields_load_the_same_through_the_fast_decoder_and_the_walker():
    document = with_groups()
    assert VALIDATOR.is_valid(document)
    fast = decode_snapshot(msgspec.json.encode(document))
    walked = snapshot_from_dict(document)
    assert fast is not None and fast == walked
    (group,) = fast.consumer_groups
    assert (group.protocol_type, group.protocol, group.state) == ("consumer", "range", "Stable")
    assert (group.group_protocol, group.racks_known, group.broker_assigned) == (
        "classic", True, False)
    assert group.members[0].assignment == (Assigned("t", (0, 1)),)
    assert group.members[0].assigned() == [("t", 0), ("t", 1)]
    assert group.members[1].assignment == () and group.members[1].group_instance_id == "i2"
    assert fast.brokers[0].follower_fetching and not fast.brokers[1].follower_fetching


def test_a_snapshot_written_before_the_group_fields_still_loads_with_defaults():
    snap = parse_snapshot(msgspec.json.encode(EXAMPLE))
    (group,) = snap.consumer_groups
    assert (group.protocol, group.state, group.members[0].assignment) == (None, None, ())
    assert (group.group_protocol, group.racks_known, group.broker_assigned) == (
        None, True, False)
    assert snap.brokers[0].replica_selector is None


@pytest.mark.parametrize("path,value,where", [
    ("consumer_groups[0].members[0].assignment[0].partitions", [0, -1],
     "consumer_groups[0].members[0].assignment[0].partitions[1]"),
    ("consumer_groups[0].members[0].assignment[0].topic", "",
     "consumer_groups[0].members[0].assignment[0].topic"),
    ("consumer_groups[0].members[0].assignment", {"t": [0]},
     "consumer_groups[0].members[0].assignment"),
    ("consumer_groups[0].protocol", 3, "consumer_groups[0].protocol"),
    ("consumer_groups[0].group_protocol", "", "consumer_groups[0].group_protocol"),
    ("consumer_groups[0].racks_known", None, "consumer_groups[0].racks_known"),
    ("consumer_groups[0].racks_known", "no", "consumer_groups[0].racks_known"),
    ("brokers[0].replica_selector", "", "brokers[0].replica_selector"),
])
def test_a_bad_group_field_is_refused_naming_it(path, value, where):
    document = with_groups()
    node: Any = document
    parts = path.replace("[", ".").replace("]", "").split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    node[parts[-1]] = value
    assert not VALIDATOR.is_valid(document)
    with pytest.raises(SnapshotError) as caught:
        parse_snapshot(msgspec.json.encode(document))
    assert caught.value.path == where
    agree(document)


@pytest.mark.parametrize("document", [
    mutate("consumer_groups[0].state", None),
    mutate("consumer_groups[0].members[0].assignment", []),
    mutate("consumer_groups[0].members[0].assignment", [{"topic": "t", "partitions": []}]),
    mutate("consumer_groups[0].members[0].assignment", [{"topic": "t"}]),
    mutate("consumer_groups[0].members[0].assignment", [{"topic": "t", "partitions": [0],
                                                          "x": 1}]),
    mutate("brokers[0].replica_selector", None),
])
def test_the_schema_and_the_loader_agree_on_the_new_fields(document):
    agree(document)


GROUP_PATHS = [p for p in paths(with_groups()) if p.startswith("consumer_groups")
               or p.endswith("replica_selector")]


def _changed(path: str, value: Any, delete: bool) -> dict[str, Any]:
    document = with_groups()
    parts = path.replace("[", ".").replace("]", "").split(".")
    node: Any = document
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    last: Any = int(parts[-1]) if parts[-1].isdigit() else parts[-1]
    if delete:
        del node[last]
    else:
        node[last] = value
    return document


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(GROUP_PATHS), value=json_values, delete=st.booleans())
def test_the_schema_the_walker_and_the_fast_decoder_agree_on_mutated_groups(path, value,
                                                                           delete):
    document = _changed(path, value, delete)
    agree(document)
    try:
        walked = snapshot_from_dict(document)
    except SnapshotError:
        walked = None
    fast = decode_snapshot(msgspec.json.encode(document))
    # The fast path may refuse more (the walker then decides), never accept other things.
    assert fast is None or fast == walked


# --- DescribeGroups -> snapshot groups ---------------------------------------------------


def _described(rack: str | None, protocol_type: str = "consumer") -> dict[str, Any]:
    """A DescribeGroups answer as kafka-python decodes it, from real protocol bytes."""
    from kafka.protocol.consumer.metadata import (
        ConsumerProtocolAssignment,
        ConsumerProtocolSubscription,
    )

    sub = ConsumerProtocolSubscription(version=3, topics=["b", "a"], user_data=None,
                                       owned_partitions=[], generation_id=4, rack_id=rack)
    assigned = ConsumerProtocolAssignment(version=3, user_data=None,
                                          assigned_partitions=[("b", [2, 0]), ("a", [1])])
    member = {
        "member_id": "rdkafka-1", "group_instance_id": None, "client_id": "rdkafka",
        "client_host": "/127.0.0.1",
        "member_metadata": ConsumerProtocolSubscription.decode(sub.encode()).to_dict(),
        "member_assignment": ConsumerProtocolAssignment.decode(assigned.encode()).to_dict(),
    }
    return {"error": None, "group_state": "Stable", "protocol_type": protocol_type,
            "protocol_data": "cooperative-sticky", "members": [member]}


def test_a_member_s_rack_topics_and_assignment_come_from_its_subscription_v3():
    record = group_record("g", _described("rack2"))
    assert record == {
        "group": "g", "protocol_type": "consumer", "protocol": "cooperative-sticky",
        "state": "Stable", "group_protocol": "classic",
        "members": [{
            "member_id": "rdkafka-1", "group_instance_id": None, "client_id": "rdkafka",
            "rack": "rack2", "topics": ["a", "b"],
            "assignment": [{"topic": "a", "partitions": [1]},
                           {"topic": "b", "partitions": [0, 2]}],
        }],
    }
    assert VALIDATOR.is_valid({**EXAMPLE, "consumer_groups": [record]})


def test_a_member_without_client_rack_has_none_and_other_protocols_are_left_out():
    assert group_record("g", _described(None))["members"][0]["rack"] is None
    assert group_record("connect", _described("r1", protocol_type="connect")) is None
    assert group_record("gone", {"error": "GroupIdNotFound", "members": []}) is None
    assert group_record("empty", {**_described("r1"), "members": []}) is None


def test_undecodable_metadata_leaves_an_unplaceable_member_not_an_error():
    raw = {"member_id": "m", "client_id": "c", "member_metadata": b"\x00\x09junk",
           "member_assignment": b"\x01"}
    assert member_record(raw) == {"member_id": "m", "group_instance_id": None,
                                  "client_id": "c", "rack": None, "topics": [],
                                  "assignment": []}


class _Admin:
    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def list_groups(self) -> list[dict[str, Any]]:
        return [{"group_id": "g", "protocol_type": "consumer"},
                {"group_id": "connect-x", "protocol_type": "connect"}]

    def describe_groups(self, ids: list[str]) -> dict[str, Any]:
        self.asked.append(ids)
        return {"g": _described("r1")}


def test_every_classic_consumer_group_is_read_when_none_are_named():
    admin = _Admin()
    (group,) = read_groups(admin)
    assert group["group"] == "g" and admin.asked == [["g"]]


# --- locality -------------------------------------------------------------------------


def _cluster(selector: str | None = None, sizes: tuple[int, ...] = (GIB,) * 4,
             assignment: dict[str, list[int]] | None = None,
             racks: dict[str, str | None] | None = None) -> Any:
    """3 brokers on racks r0, r1, r2; topic t: 4 partitions of RF 2, all led from r0."""
    brokers = [broker(b, f"r{b}") for b in range(3)]
    if selector:
        for b in brokers:
            b["replica_selector"] = selector
    replicas = [[0, 1], [0, 2], [0, 1], [0, 2]]
    parts = [partition("t", i, [(b, "/d1", sizes[i]) for b in r]) for i, r in enumerate(replicas)]
    assignment = assignment or {"a": [0, 1], "b": [2, 3]}
    racks = racks or {"a": "r1", "b": "r2"}
    members = [{"member_id": m, "client_id": f"client-{m}", "rack": racks[m], "topics": ["t"],
                "assignment": [{"topic": "t", "partitions": ps}]}
               for m, ps in assignment.items()]
    group = {"group": "g", "protocol_type": "consumer", "protocol": "range",
             "state": "Stable", "members": members}
    return model(doc(brokers, parts, [group]))


def test_without_follower_fetching_only_the_leader_s_rack_is_local():
    m = _cluster()
    now = locality(m, m.snapshot.consumer_groups[0])
    assert (now.ratio, now.local, now.partitions) == (0.0, 0, 4)
    assert now.members == {"a": 0.0, "b": 0.0}


def test_with_the_rack_aware_selector_any_in_sync_replica_on_the_rack_is_local():
    m = _cluster(RACK_AWARE_SELECTOR)
    (group,) = m.snapshot.consumer_groups
    # a (r1) reads 0 (replicas r0, r1) locally and 1 (r0, r2) across; b (r2) the reverse
    now = locality(m, group)
    assert (now.ratio, now.members) == (0.5, {"a": 0.5, "b": 0.5})
    planned, strategy = planned_locality(m, group)
    assert strategy == "range" and planned.ratio == 1.0


def test_shares_are_weighted_by_partition_bytes_when_known():
    m = _cluster(RACK_AWARE_SELECTOR, sizes=(3 * GIB, GIB, GIB, GIB))
    now = locality(m, m.snapshot.consumer_groups[0])
    assert now.by_bytes and now.members["a"] == 0.75
    assert now.ratio == pytest.approx((3 + 1) / 6)
    empty = _cluster(RACK_AWARE_SELECTOR, sizes=(0, 0, 0, 0))
    assert locality(empty, empty.snapshot.consumer_groups[0]).by_bytes is False


def test_a_member_without_a_rack_reads_nothing_locally_and_is_diagnosed():
    m = _cluster(racks={"a": "r1", "b": None})
    (group,) = m.snapshot.consumer_groups
    d = diagnose(m, group)
    assert d.members_without_rack == (("b", "client-b"),)
    assert d.brokers_without_selector == (0,)
    assert d.racks == ("r0", "r1", "r2")
    text = d.text()
    assert "b (client.id client-b)" in text and "replica.selector.class" in text
    assert locality(m, group).members["b"] == 0.0


def test_partitions_with_every_replica_in_one_rack_are_named():
    brokers = [broker(0, "r0"), broker(1, "r0"), broker(2, "r1")]
    parts = [partition("t", 0, [0, 1]), partition("t", 1, [2, 0])]
    group = {"group": "g", "protocol": "roundrobin", "members": [
        {"member_id": "a", "client_id": "", "rack": "r1", "topics": ["t"],
         "assignment": [{"topic": "t", "partitions": [0, 1]}]}]}
    m = model(doc(brokers, parts, [group]))
    (g,) = m.snapshot.consumer_groups
    d = diagnose(m, g)
    assert d.one_rack_partitions == ("t-0",) and d.assignor == "roundrobin"
    assert strategy_for(g) == "cooperative-sticky"
    assert "t-0" in d.text() and "roundrobin is not rack-aware" in d.text()


def test_a_plan_s_assignment_is_measured_the_same_way():
    m = _cluster(RACK_AWARE_SELECTOR)
    (group,) = m.snapshot.consumer_groups
    plan = {"a": [TopicPartition("t", 0), TopicPartition("t", 2)],
            "b": [TopicPartition("t", 1), TopicPartition("t", 3)]}
    assert locality(m, group, plan).ratio == 1.0


def test_the_collector_exports_each_group_s_locality_now_and_planned():
    registry = CollectorRegistry(auto_describe=True)
    metrics = PlacementMetrics(registry)
    metrics.update(_cluster(RACK_AWARE_SELECTOR).snapshot)
    text = generate_latest(registry).decode()
    assert 'selfheal_consumer_group_rack_locality_ratio{group="g"} 0.5' in text
    assert 'selfheal_consumer_group_planned_rack_locality_ratio{group="g"} 1.0' in text
    assert 'selfheal_consumer_group_members{group="g"} 2.0' in text
    assert 'selfheal_broker_follower_fetching{broker="0",rack="r0"} 1.0' in text
