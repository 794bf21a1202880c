"""KIP-848 consumer groups (`group.protocol=consumer`): read through confluent-kafka's
ConsumerGroupDescribe beside the classic ones, recorded with their protocol and the
broker's assignor, measured where their racks are known and said to be unknown where
not, and diagnosed (a page naming group.consumer.assignors and client.rack) instead of
given an assign_consumers nobody outside the group could apply."""

from __future__ import annotations

import json
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import msgspec
import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupType, Node, TopicPartition
from confluent_kafka.admin import ConsumerGroupDescription, MemberAssignment, MemberDescription
from prometheus_client import CollectorRegistry, generate_latest

from core import groups, kip848
from core.locality import diagnose, locality, planned_locality
from remediation.consumers.consumer import ConfigError, _check, _check_group
from schemas.snapshot import parse_snapshot, snapshot_from_dict
from schemas.snapshot_decode import decode_snapshot
from schemas.snapshot_types import RACK_AWARE_SELECTOR
from streams.collect.placement_metrics import PlacementMetrics
from streams.detect_types import ASSIGN_CONSUMERS, PAGE, SNAPSHOT, Decision, SnapshotRef
from streams.facts import snapshot_facts
from streams.propose import Proposer
from tests.unit.plan_snapshots import GIB, broker, doc, model, partition
from tests.unit.test_plan_snapshot import EXAMPLE, VALIDATOR, agree
from tests.unit.test_stream_consumers import SETTINGS, T0, WINDOW, seen
from tests.unit.test_stream_detect import Run


def _description(kind: ConsumerGroupType = ConsumerGroupType.CONSUMER,
                 state: ConsumerGroupState = ConsumerGroupState.STABLE) -> Any:
    members = [
        MemberDescription("m-1", "app", "/127.0.0.1", MemberAssignment(
            [TopicPartition("b", 2), TopicPartition("a", 1), TopicPartition("b", 0)]),
            group_instance_id="i-1"),
        MemberDescription("m-2", "", "/127.0.0.1", MemberAssignment([])),
    ]
    return ConsumerGroupDescription("g", False, members, "uniform", state,
                                    Node(1, "localhost", 9092), type=kind)


# --- the reader -----------------------------------------------------------------------


def test_a_kip848_group_is_recorded_with_its_protocol_and_the_broker_s_assignor():
    record = kip848.group_record(_description())
    assert record == {
        "group": "g", "protocol_type": "consumer", "protocol": "uniform", "state": "Stable",
        "group_protocol": "consumer", "racks_known": False,
        "members": [
            {"member_id": "m-1", "group_instance_id": "i-1", "client_id": "app", "rack": None,
             "topics": ["a", "b"], "assignment": [{"topic": "a", "partitions": [1]},
                                                  {"topic": "b", "partitions": [0, 2]}]},
            {"member_id": "m-2", "group_instance_id": None, "client_id": "", "rack": None,
             "topics": [], "assignment": []},
        ],
    }
    assert VALIDATOR.is_valid({**EXAMPLE, "consumer_groups": [record]})


def test_a_classic_description_or_a_reconciling_state_is_not_taken_for_another():
    assert kip848.group_record(_description(ConsumerGroupType.CLASSIC)) is None
    record = kip848.group_record(_description(state=ConsumerGroupState.UNKNOWN))
    assert record is not None and record["state"] == "Unknown"  # Assigning/Reconciling


class _Admin:
    """kafka-python's admin as ListGroups v5 and DescribeGroups answer on 4.x."""

    config = {"bootstrap_servers": "127.0.0.1:1", "client_id": "x", "request_timeout_ms": 4000}

    def __init__(self) -> None:
        self.described: list[list[str]] = []

    def list_groups(self) -> list[dict[str, Any]]:
        return [{"group_id": "new", "protocol_type": "consumer", "group_type": "consumer"},
                {"group_id": "old", "protocol_type": "consumer", "group_type": "classic"},
                {"group_id": "shared", "protocol_type": "share", "group_type": "share"}]

    def describe_groups(self, ids: list[str]) -> dict[str, Any]:
        self.described.append(ids)
        member = {"member_id": "c-1", "client_id": "c", "member_metadata": None,
                  "member_assignment": None}
        return {"old": {"error": None, "group_state": "Stable", "protocol_type": "consumer",
                        "protocol_data": "range", "members": [member]}}


def test_each_kind_of_group_is_described_by_the_call_that_knows_it(monkeypatch):
    asked: list[tuple[dict[str, Any], list[str], float]] = []

    def describe(client: dict[str, Any], names: list[str], timeout_s: float) -> list[Any]:
        asked.append((client, names, timeout_s))
        return [kip848.group_record(_description()) | {"group": "new"}]

    monkeypatch.setattr(kip848, "read_groups", describe)
    admin = _Admin()
    found = groups.read_groups(admin)
    assert [(g["group"], g["group_protocol"], g["protocol"]) for g in found] == [
        ("new", "consumer", "uniform"), ("old", "classic", "range")]
    assert admin.described == [["old"]]  # DescribeGroups never sees the KIP-848 group
    assert asked == [({"bootstrap.servers": "127.0.0.1:1", "client.id": "x",
                       "security.protocol": "PLAINTEXT"}, ["new"], 4.0)]


def test_the_kip848_client_logs_in_as_the_admin_it_follows(monkeypatch):
    """ConsumerGroupDescribe goes through confluent-kafka: it must carry the
    [cluster.security] the kafka-python admin was opened with, not reach a secured
    cluster bare."""
    from core.security import KafkaSecurity

    admin = _Admin()
    monkeypatch.setenv("COLLECT_PASSWORD", "s3cret")
    admin.selfheal_security = KafkaSecurity(protocol="SASL_SSL",
                                            sasl_mechanism="SCRAM-SHA-512",
                                            username="selfheal-collect",
                                            password_env="COLLECT_PASSWORD")
    config = kip848.client_config(admin)
    assert config["security.protocol"] == "SASL_SSL"
    assert config["sasl.mechanism"] == "SCRAM-SHA-512"
    assert config["sasl.username"] == "selfheal-collect"
    assert config["sasl.password"] == "s3cret"


# --- locality and diagnosis -------------------------------------------------------------


def _document(racks_known: bool, protocol: str = "consumer") -> dict[str, Any]:
    """3 racks, follower fetching on; every leader on r0. Members on r1 and r2 (when
    known) were given the partitions whose replicas miss their racks."""
    brokers = [broker(b, f"r{b}") for b in range(3)]
    for b in brokers:
        b["replica_selector"] = RACK_AWARE_SELECTOR
    parts = [partition("t", i, [(b, "/d1", GIB) for b in r])
             for i, r in enumerate([[0, 1], [0, 2], [0, 1], [0, 2]])]
    members = [{"member_id": m, "client_id": f"c{m}", "rack": rack if racks_known else None,
                "topics": ["t"], "assignment": [{"topic": "t", "partitions": ps}]}
               for m, rack, ps in (("a", "r1", [1, 3]), ("b", "r2", [0, 2]))]
    group = {"group": "g", "protocol_type": "consumer", "protocol": "uniform",
             "state": "Stable", "group_protocol": protocol, "racks_known": racks_known,
             "members": members}
    return doc(brokers, parts, [group])


def test_the_fields_load_the_same_through_the_fast_decoder_and_the_walker():
    document = _document(racks_known=False)
    agree(document)
    fast = decode_snapshot(msgspec.json.encode(document))
    assert fast is not None and fast == snapshot_from_dict(document)
    (group,) = fast.consumer_groups
    assert (group.group_protocol, group.racks_known, group.broker_assigned) == (
        "consumer", False, True)


def test_unknown_racks_leave_locality_unknown_and_the_diagnosis_says_so():
    m = model(_document(racks_known=False))
    (group,) = m.snapshot.consumer_groups
    now = locality(m, group)
    assert (now.ratio, now.partitions, now.members) == (None, 4, {"a": None, "b": None})
    d = diagnose(m, group)
    assert d.members_without_rack == () and d.racks_unknown and d.assignor is None
    text = d.text()
    assert "client.rack cannot be read" in text and "not measured" in text
    assert "group.consumer.assignors" in text and "assignor uniform" in text
    assert "no assign_consumers is proposed" in text


def test_known_racks_are_measured_as_a_classic_group_s_are():
    m = model(_document(racks_known=True))
    (group,) = m.snapshot.consumer_groups
    assert locality(m, group).ratio == 0.0
    assert planned_locality(m, group)[0].ratio == 1.0
    d = diagnose(m, group)
    assert d.broker_assignor == "uniform" and not d.racks_unknown
    assert "client.rack" in d.text() and "KAFKA-18327" in d.text()


def test_the_gauges_claim_no_rackless_members_when_racks_are_unknown():
    registry = CollectorRegistry(auto_describe=True)
    PlacementMetrics(registry).update(parse_snapshot(msgspec.json.encode(
        _document(racks_known=False))))
    text = generate_latest(registry).decode()
    assert 'selfheal_consumer_group_members{group="g"} 2.0' in text
    assert "selfheal_consumer_group_members_without_rack{" not in text
    assert "selfheal_consumer_group_rack_locality_ratio{" not in text


# --- detection and proposal ---------------------------------------------------------------


def _facts(racks_known: bool) -> Any:
    return snapshot_facts(snapshot_from_dict(_document(racks_known))).groups["g"]


def test_a_kip848_group_below_its_plan_is_paged_with_the_settings_never_assigned():
    f = _facts(racks_known=True)
    assert f.broker_assigned and (f.ratio, f.planned) == (0.0, 1.0)
    run = Run(SETTINGS)
    assert run.batch(seen(T0, g=f)) == []
    (page,) = run.batch(seen(T0 + WINDOW, g=f))
    assert (page.type, page.group) == (PAGE, "g")
    assert "reads 0% on its members' racks" in page.reason
    assert "group.consumer.assignors" in page.reason and "client.rack" in page.reason
    assert run.batch(seen(T0 + 3 * WINDOW, g=f)) == []


def test_a_kip848_group_with_unknown_racks_is_paged_once_whatever_its_membership():
    f = _facts(racks_known=False)
    assert (f.ratio, f.planned, f.no_rack) == (None, None, ())
    run = Run(SETTINGS)
    assert run.batch(seen(T0, g=f)) == []
    (page,) = run.batch(seen(T0 + WINDOW, g=f))
    assert page.type == PAGE and "cluster with racks (r0, r1, r2)" in page.reason
    assert "client.rack cannot be read" in page.reason
    moved = type(f)(**{**{k: getattr(f, k) for k in f.__slots__}, "membership": "other"})
    assert run.batch(seen(T0 + 3 * WINDOW, g=moved)) == []
    # A cluster without racks has no locality to speak of: nothing at all.
    bare = type(f)(**{**{k: getattr(f, k) for k in f.__slots__}, "racks": ()})
    fresh = Run(SETTINGS)
    assert [fresh.batch(seen(T0 + k * WINDOW, g=bare)) for k in range(3)] == [[], [], []]


def test_the_proposer_plans_no_assignment_for_a_kip848_group():
    raw = msgspec.json.encode(_document(racks_known=True))
    ref = SnapshotRef("selfheal.cluster-snapshots", 0, 7, T0)
    decision = Decision(ASSIGN_CONSUMERS, "test", T0, SNAPSHOT, None, None, ref, (), "x",
                        group="g")
    assert Proposer(lambda r, c: raw).actions(decision) == []
    classic = msgspec.json.encode(_document(racks_known=True, protocol="classic"))
    (action,) = Proposer(lambda r, c: classic).actions(decision)
    assert action.type == ASSIGN_CONSUMERS  # the same group, classic: planned


# --- the opt-in helper ---------------------------------------------------------------------


class _GroupAdmin:
    def __init__(self, kind: ConsumerGroupType | None) -> None:
        self.kind = kind

    def describe_consumer_groups(self, names: list[str], **_: Any) -> dict[str, Future]:
        future: Future = Future()
        if self.kind is None:
            future.set_exception(RuntimeError("no answer"))
        else:
            future.set_result(_description(self.kind))
        return {names[0]: future}


def test_the_helper_says_it_cannot_work_in_a_kip848_group_however_it_meets_one():
    with pytest.raises(ConfigError, match="classic groups only") as caught:
        _check({"group.id": "g", "group.protocol": "consumer"})
    assert "group.consumer.assignors" in str(caught.value)
    with pytest.raises(ConfigError, match="runs as a KIP-848 group on the cluster"):
        _check_group(_GroupAdmin(ConsumerGroupType.CONSUMER), "g", 1.0)
    _check_group(_GroupAdmin(ConsumerGroupType.CLASSIC), "g", 1.0)
    _check_group(_GroupAdmin(None), "g", 1.0)  # a new group: it starts classic


def test_the_airflow_consumer_plan_skips_a_kip848_group_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(Path(__file__).parents[2] / "airflow" / "dags"))
    from selfheal_dag_support import group_steps, steps

    monkeypatch.setattr(steps, "model_of", lambda snap: model(_document(racks_known=True)))
    monkeypatch.setattr(steps, "_targets", lambda: None)
    monkeypatch.setattr(steps, "run_folder", lambda: tmp_path)
    out = group_steps.plan_consumer_groups({}, {"groups": ["g"], "threshold": 1.1})
    assert "group.consumer.assignors" in out["groups"]["g"]["skipped"]
    assert json.loads((tmp_path / "consumer-plans.json").read_text()) == {}
