"""Policy decisions: modes per type, limits, the circuit breaker, and the policy file."""

from __future__ import annotations

from pathlib import Path

import pytest

from remediation.executor.actions import parse_action
from remediation.executor.policy import (
    Breaker,
    ClusterHealth,
    Limits,
    Policy,
    PolicyError,
    load_policy,
    policy_from_mapping,
)
from tests.unit.action_records import fix_offline, of_type
from tests.unit.plan_snapshots import broker, doc, model, partition

HEALTHY = ClusterHealth(brokers=6, failed_brokers=1, log_dirs=12, failed_log_dirs=1,
                        brokers_with_offline_dir=frozenset({3}))
EXAMPLE = Path(__file__).parents[2] / "remediation" / "executor" / "policy.example.toml"


def test_defaults_ask_approval_for_offline_fixes_and_run_dir_moves_by_themselves() -> None:
    policy = Policy()
    fix = policy.decide(parse_action(fix_offline()), HEALTHY, 0)
    assert fix.mode == "approve" and fix.reasons == ("policy: fix_offline_replicas needs approval",)
    for type_ in ("move_replica_dirs", "rebalance_leaders", "assign_consumers"):
        decision = policy.decide(parse_action(of_type(type_)), HEALTHY, 0)
        assert decision.mode == "auto" and not decision.page, type_


def test_a_page_always_waits_for_a_human_and_pages() -> None:
    decision = Policy().decide(parse_action(of_type("page_operator")), HEALTHY, 0)
    assert decision.mode == "approve" and decision.page


def test_auto_fix_runs_by_itself_when_policy_allows() -> None:
    policy = policy_from_mapping({"actions": {"fix_offline_replicas": "auto"}})
    assert policy.decide(parse_action(fix_offline()), HEALTHY, 0).mode == "auto"


@pytest.mark.parametrize("health,reason", [
    (ClusterHealth(brokers=6, failed_brokers=2), "2 brokers failing at once (limit 1)"),
    (ClusterHealth(brokers=6, log_dirs=12, failed_log_dirs=4),
     "4 of 12 log dirs failing (33% > 25%)"),
])
def test_the_breaker_stops_auto_actions_and_pages(health: ClusterHealth, reason: str) -> None:
    decision = Policy().decide(parse_action(of_type("rebalance_leaders")), health, 0)
    assert decision.mode == "approve" and decision.page
    assert any(reason in r for r in decision.reasons), decision.reasons


def test_at_the_breaker_threshold_nothing_trips() -> None:
    health = ClusterHealth(brokers=6, failed_brokers=1, log_dirs=12, failed_log_dirs=3)
    assert Policy().decide(parse_action(of_type("rebalance_leaders")), health, 0).mode == "auto"


def test_limits_turn_auto_into_approve_and_say_which() -> None:
    policy = Policy(modes={**Policy().modes, "fix_offline_replicas": "auto"},
                    limits=Limits(max_partitions_per_action=2, max_bytes_per_hour=10_000_000,
                                  max_concurrent_reassignments_per_broker=1))
    big = parse_action(fix_offline(partitions=3, bytes_=2_000_000))
    busy = ClusterHealth(brokers=6, reassignments_in_flight={4: 1})
    decision = policy.decide(big, busy, moved_bytes_last_hour=9_000_000)
    assert decision.mode == "approve" and not decision.page
    assert [r.split(":")[0] for r in decision.reasons] == ["limit"] * 3
    assert "max_partitions_per_action = 2" in decision.reasons[0]
    assert "max_bytes_per_hour" in decision.reasons[1]
    assert "brokers [4]" in decision.reasons[2]
    assert policy.decide(parse_action(fix_offline()), ClusterHealth(brokers=6), 0).mode == "auto"


def test_dir_moves_on_a_broker_with_an_offline_dir_are_refused() -> None:
    action = parse_action(of_type("move_replica_dirs"))  # moves a replica on broker 1
    health = ClusterHealth(brokers=3, brokers_with_offline_dir=frozenset({1}))
    decision = Policy().decide(action, health, 0)
    assert decision.mode == "refuse"
    assert decision.reasons == (("broker 1 has an offline log dir; intra-broker moves are "
                                "refused until it is fixed or removed from log.dirs"),)


def test_the_example_file_is_the_defaults() -> None:
    assert load_policy(EXAMPLE) == Policy()


def test_a_partial_file_keeps_the_other_defaults(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text("[breaker]\nmax_failed_brokers = 3\nmax_failed_log_dir_percent = 10\n")
    policy = load_policy(path)
    assert policy.breaker == Breaker(3, 10.0)
    assert policy.limits == Limits() and policy.modes == Policy().modes


@pytest.mark.parametrize("data,message", [
    ({"actoins": {}}, "unknown key actoins; known: actions, breaker, limits"),
    ({"actions": {"reboot": "auto"}}, "unknown key actions.reboot"),
    ({"actions": {"move_replica_dirs": "yes"}}, "actions.move_replica_dirs = 'yes'; use"),
    ({"actions": {"page_operator": "auto"}}, "page_operator cannot be \"auto\""),
    ({"limits": {"max_bytes_per_hour": "1GB"}}, "limits.max_bytes_per_hour must be an integer"),
    ({"limits": {"approval_ttl_seconds": True}}, "limits.approval_ttl_seconds must be an integer"),
    ({"limits": {"max_partitions": 5}}, "unknown key limits.max_partitions"),
    ({"breaker": {"max_failed_log_dir_percent": 150}}, "is a percentage"),
    ({"breaker": {"max_failed_brokers": -1}}, "breaker.max_failed_brokers must be >= 0"),
    ({"limits": 5}, "limits must be a table"),
])
def test_bad_policy_keys_are_named(data: dict[str, object], message: str) -> None:
    with pytest.raises(PolicyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        policy_from_mapping(data, "p.toml")


def test_a_missing_or_broken_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="not found; copy remediation/executor/policy.example"):
        load_policy(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[limits\n")
    with pytest.raises(PolicyError, match="not valid TOML"):
        load_policy(bad)


def test_health_from_a_snapshot_counts_dead_brokers_and_failed_dirs() -> None:
    brokers = [broker(1, "a", dirs=["/d1", "/d2"]),
               broker(2, "b", dirs=["/d1", {"path": "/d2", "online": False}]),
               broker(3, "c", dirs=["/d1", "/d2"], alive=False)]
    health = ClusterHealth.from_model(model(doc(brokers, [partition("t", 0, [1, 2])])), {1: 1})
    assert (health.brokers, health.failed_brokers) == (3, 2)
    assert (health.log_dirs, health.failed_log_dirs) == (6, 1)
    assert health.brokers_with_offline_dir == {2}
    assert health.reassignments_in_flight == {1: 1}
