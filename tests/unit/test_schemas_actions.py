"""Action ids are stable hashes of (cluster, type, plan); the builder makes valid records."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.plan.formats import LeaderPlan, Reassignment, TopicPartition
from schemas import registry
from schemas.actions import action_id, build_action, summarise
from schemas.plans import PartitionAssignment
from schemas.records import Action, Trigger
from schemas.registry import RecordError

T0 = "2026-11-22T03:50:54.123Z"
PLAN = {"version": 1, "partitions": [
    {"topic": "orders", "partition": 3, "replicas": [2, 3], "log_dirs": ["any", "any"]}]}


def test_the_id_is_the_documented_sha256():
    text = '["c1","fix_offline_replicas",{"partitions":[{"log_dirs":["any","any"],' \
           '"partition":3,"replicas":[2,3],"topic":"orders"}],"version":1}]'
    assert action_id("c1", "fix_offline_replicas", PLAN) == hashlib.sha256(
        text.encode()).hexdigest()


@pytest.mark.parametrize("doc", registry.schema("action")["examples"])
def test_the_schema_examples_carry_their_true_ids(doc):
    assert doc["action_id"] == action_id(doc["cluster_id"], doc["type"], doc["plan"])


def test_the_same_problem_twice_gets_the_same_id_and_anything_else_another():
    same = json.loads(json.dumps(PLAN))
    assert action_id("c1", "fix_offline_replicas", same) == action_id(
        "c1", "fix_offline_replicas", PLAN)
    others = {
        action_id("c2", "fix_offline_replicas", PLAN),
        action_id("c1", "move_replica_dirs", PLAN),
        action_id("c1", "fix_offline_replicas", PLAN | {"version": 2}),
    }
    assert action_id("c1", "fix_offline_replicas", PLAN) not in others


def test_replica_order_changes_the_id_because_the_first_replica_leads():
    swapped = {"version": 1, "partitions": [PLAN["partitions"][0] | {"replicas": [3, 2]}]}
    assert action_id("c1", "rebalance_leaders", swapped) != action_id(
        "c1", "rebalance_leaders", PLAN)


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=6))
def test_key_order_never_changes_the_id(plan):
    reordered = dict(reversed(list(plan.items())))
    assert action_id("c", "manual", plan) == action_id("c", "manual", reordered)


def test_planner_objects_hash_like_their_json():
    plan = Reassignment((PartitionAssignment("orders", 3, (2, 3), ("any", "any")),))
    assert action_id("c1", "fix_offline_replicas", plan) == action_id(
        "c1", "fix_offline_replicas", PLAN)


def test_build_action_fills_id_summary_and_validates():
    action = build_action("c1", "fix_offline_replicas", PLAN,
                          reason="log dir /data/d2 on broker 1 is offline",
                          trigger=Trigger("logdir_event", 1, "/data/d2"), event_time=T0,
                          bytes_moved=4096, created_at=T0)
    assert action.action_id == action_id("c1", "fix_offline_replicas", PLAN)
    assert (action.summary.partitions, action.summary.bytes, action.summary.brokers) == (
        1, 4096, (2, 3))
    assert Action.from_json(action.to_json()) == action
    assert registry.is_rfc3339(action.created_at)


def test_build_action_takes_a_leader_plan_and_counts_each_partition_once():
    plan = LeaderPlan(Reassignment((PartitionAssignment("orders", 0, (2, 1, 3)),)),
                      (TopicPartition("orders", 0), TopicPartition("orders", 1)))
    action = build_action("c1", "rebalance_leaders", plan, reason="broker 1 leads too much",
                          trigger=Trigger("schedule"), event_time=T0, created_at=T0)
    assert action.plan["election"]["partitions"][1] == {"topic": "orders", "partition": 1}
    assert (action.summary.partitions, action.summary.brokers) == (2, (1, 2, 3))


def test_build_action_rejects_a_plan_of_the_wrong_shape_with_its_path():
    with pytest.raises(RecordError, match=r"^plan\.message: required field is missing"):
        build_action("c1", "page_operator", PLAN, reason="x", trigger=Trigger("manual"),
                     event_time=T0, created_at=T0)
    with pytest.raises(RecordError, match=r"^summary\.bytes: -1 is less than the minimum"):
        build_action("c1", "fix_offline_replicas", PLAN, reason="x",
                     trigger=Trigger("manual"), event_time=T0, bytes_moved=-1, created_at=T0)


def test_summaries_of_pages_and_consumer_plans():
    page = {"message": "replace the disk", "brokers": [3, 1], "log_dirs": ["/d"]}
    assert summarise("page_operator", page).brokers == (1, 3)
    consumers = {"group": "g", "cross_rack": 0, "assignment": {
        "m1": [{"topic": "t", "partition": 0}], "m2": [{"topic": "t", "partition": 1}]}}
    assert summarise("assign_consumers", consumers).partitions == 2
