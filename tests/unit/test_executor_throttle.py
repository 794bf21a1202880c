"""Throttles: what an action sets, that an operator's values survive, and what is restored."""

from __future__ import annotations

from remediation.executor.throttle import (
    DIR_RATE,
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    changes,
    describe,
    inter_broker,
    intra_broker,
    merged,
    saved_values,
)
from tests.unit.test_executor_checks import BROKEN, cluster, fix, leaders, partition


def test_a_copy_throttles_its_online_sources_and_its_new_replicas() -> None:
    view = cluster(BROKEN, partition("t", 1, [1, 2]), offline=(3,))
    wanted = inter_broker(fix([1, 4]), view, 1000)
    assert wanted == {
        "broker:1": {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"},
        "broker:4": {LEADER_RATE: "1000", FOLLOWER_RATE: "1000"},
        # broker 3's replica is offline: it serves nothing and is not throttled
        "topic:t": {LEADER_REPLICAS: "0:1", FOLLOWER_REPLICAS: "0:4"},
    }


def test_no_throttle_for_a_reorder_or_a_zero_rate() -> None:
    view = cluster(partition("t", 0, [1, 2, 3]))
    assert inter_broker(leaders([2, 1, 3]), view, 1000) == {}
    assert inter_broker(fix([1, 4]), cluster(BROKEN, offline=(3,)), 0) == {}
    assert intra_broker({("t", 0, 2): "/d2"}, 0) == {}
    assert intra_broker({("t", 0, 2): "/d2", ("t", 1, 2): "/d1"}, 5) == {
        "broker:2": {DIR_RATE: "5"}}


def test_an_operators_replica_lists_are_kept_and_star_stays_star() -> None:
    wanted = {"topic:t": {LEADER_REPLICAS: "0:1", FOLLOWER_REPLICAS: "0:4"}}
    found = {"topic:t": {LEADER_REPLICAS: "7:2,0:1", FOLLOWER_REPLICAS: "*"}}
    assert merged(wanted, found) == {
        "topic:t": {LEADER_REPLICAS: "0:1,7:2", FOLLOWER_REPLICAS: "*"}}


def test_only_changed_keys_are_sent_and_the_found_values_are_saved() -> None:
    wanted = {"broker:1": {LEADER_RATE: "10", FOLLOWER_RATE: "10"}}
    found = {"broker:1": {LEADER_RATE: "10", FOLLOWER_RATE: None}}
    assert changes(wanted, found) == {"broker:1": {FOLLOWER_RATE: "10"}}
    assert saved_values(wanted, found) == {"broker:1": {LEADER_RATE: "10", FOLLOWER_RATE: None}}
    assert describe(saved_values(wanted, found)) == (
        f"broker:1 {FOLLOWER_RATE}=(unset), {LEADER_RATE}=10")
