"""`plan replicas`: KIP-36 rack-aware assignment, as Kafka's AdminUtils computes it."""

from __future__ import annotations

import json
import random
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.plan.errors import PlanError
from core.plan.replicas import assign_replicas, rack_alternated

SELFHEAL = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "selfheal")

# The KIP-36 seed's examples.
SIX = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
SEED_TABLE = {
    0: (0, 3, 1),
    1: (3, 1, 5),
    2: (1, 5, 4),
    3: (5, 4, 2),
    4: (4, 2, 0),
    5: (2, 0, 3),
    6: (0, 4, 2),
    7: (3, 2, 0),
    8: (1, 0, 3),
    9: (5, 3, 1),
    10: (4, 1, 5),
    11: (2, 5, 4),
}
UNEVEN = {0: "rack1", 1: "rack2", 2: "rack2"}


def replica_lists(plan):
    return {p.partition: p.replicas for p in plan.partitions}


def test_rack_alternated_list_matches_the_seed():
    assert rack_alternated(SIX) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated(UNEVEN) == [0, 1, 2]


def test_twelve_partitions_rf3_reproduce_the_seed_tables_with_start_index_0():
    plan = assign_replicas(SIX, 12, 3, start_index=0)
    assert replica_lists(plan) == SEED_TABLE


def test_uneven_racks_skip_a_broker_whose_rack_is_used_as_in_the_seed():
    plan = assign_replicas(UNEVEN, 3, 2, start_index=0)
    assert replica_lists(plan) == {0: (0, 1), 1: (1, 0), 2: (2, 0)}


def test_rack_unaware_matches_the_adminutils_javadoc_table():
    # AdminUtils' own example: 5 brokers, 10 partitions, RF 3, start index 0.
    plan = assign_replicas(dict.fromkeys(range(5)), 10, 3, start_index=0)
    lists = replica_lists(plan)
    assert lists[0] == (0, 1, 2)
    assert lists[4] == (4, 0, 1)
    assert lists[5] == (0, 2, 3)  # second round: the follower shift grew by one
    assert lists[9] == (4, 1, 2)


def test_without_start_index_the_layout_is_a_rotation_chosen_at_random():
    plans = {
        tuple(replica_lists(assign_replicas(SIX, 6, 3, rng=random.Random(seed))).values())
        for seed in range(20)
    }
    assert len(plans) > 1
    for plan in plans:
        assert Counter(p[0] for p in plan) == Counter(range(6))


def test_mixed_racks_are_refused_unless_ignored():
    mixed = {0: "r1", 1: None, 2: "r2"}
    with pytest.raises(PlanError, match="broker 1 has no rack"):
        assign_replicas(mixed, 3, 2, start_index=0)
    plan = assign_replicas(mixed, 3, 2, start_index=0, ignore_racks=True)
    assert replica_lists(plan) == replica_lists(
        assign_replicas(dict.fromkeys(mixed), 3, 2, start_index=0)
    )


@pytest.mark.parametrize(
    ("partitions", "rf", "message"),
    [(0, 1, "partitions"), (3, 0, "replication factor"), (3, 7, "larger than the 6 brokers")],
)
def test_impossible_requests_are_refused(partitions, rf, message):
    with pytest.raises(PlanError, match=message):
        assign_replicas(SIX, partitions, rf, start_index=0)


racks_and_brokers = st.dictionaries(
    st.integers(0, 40), st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=12
)


@settings(max_examples=60, deadline=None)
@given(brokers=racks_and_brokers, partitions=st.integers(1, 40), data=st.data())
def test_every_partition_spans_min_rf_racks_on_distinct_brokers(brokers, partitions, data):
    rf = data.draw(st.integers(1, len(brokers)))
    start = data.draw(st.integers(0, 50))
    plan = assign_replicas(brokers, partitions, rf, start_index=start)
    racks = set(brokers.values())
    assert [p.partition for p in plan.partitions] == list(range(partitions))
    for p in plan.partitions:
        assert len(p.replicas) == rf
        assert len(set(p.replicas)) == rf
        assert len({brokers[b] for b in p.replicas}) == min(rf, len(racks))


@settings(max_examples=40, deadline=None)
@given(per_rack=st.integers(1, 4), racks=st.integers(1, 4), rounds=st.integers(1, 3))
def test_equal_racks_give_every_broker_the_same_leader_count(per_rack, racks, rounds):
    brokers = {r * 10 + k: f"rack{r}" for r in range(racks) for k in range(per_rack)}
    plan = assign_replicas(brokers, rounds * len(brokers), min(racks, len(brokers)), start_index=1)
    leaders = Counter(p.replicas[0] for p in plan.partitions)
    assert set(leaders.values()) == {rounds}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SELFHEAL, "plan", *args], check=False, capture_output=True, text=True, timeout=60
    )


def test_cli_prints_the_seed_table_as_reassignment_json():
    brokers = ",".join(f"{b}:{r}" for b, r in SIX.items())
    done = run(
        "replicas",
        "--brokers",
        brokers,
        "--partitions",
        "12",
        "--replication-factor",
        "3",
        "--start-index",
        "0",
        "--topic",
        "t",
        "--explain",
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["version"] == 1
    assert {p["partition"]: tuple(p["replicas"]) for p in out["partitions"]} == SEED_TABLE
    assert {p["topic"] for p in out["partitions"]} == {"t"}
    assert "broker 0 (rack1): 2 leaders, 6 replicas" in done.stderr


def test_cli_mixed_racks_exit_2_with_a_hint():
    done = run(
        "replicas", "--brokers", "0:r1,1,2:r2", "--partitions", "3", "--replication-factor", "2"
    )
    assert done.returncode == 2
    assert "--ignore-racks" in done.stderr
    assert done.stdout == ""
    ok = run(
        "replicas",
        "--brokers",
        "0:r1,1,2:r2",
        "--partitions",
        "3",
        "--replication-factor",
        "2",
        "--ignore-racks",
    )
    assert ok.returncode == 0, ok.stderr


def test_cli_bad_broker_list_exits_2():
    done = run(
        "replicas", "--brokers", "0:r1,x:r2", "--partitions", "3", "--replication-factor", "1"
    )
    assert done.returncode == 2
    assert "'x' is not a broker id" in done.stderr
