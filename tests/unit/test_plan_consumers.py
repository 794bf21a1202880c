"""`plan consumers`: KIP-881 rack-aware assignment.

The range cases are the expectations of Kafka's own RangeAssignorTest (3.5+), rebuilt
as snapshots: brokers 0..n-1 with the given racks, partition i of the k-th topic on
brokers (i + j + offset) % n where offset counts the partitions of earlier topics,
consumers "consumer0".. with the given racks and topics.
"""

from __future__ import annotations

import gc
import itertools
import json
import random
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.plan.consumers import (
    assign_cooperative_sticky,
    assign_range,
    cross_rack,
    plan_consumers,
    topic_racks,
)
from core.plan.errors import PlanError
from schemas.snapshot import Member
from tests.unit.plan_snapshots import broker, doc, model, partition

SELFHEAL = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "selfheal")
ALL_RACKS = ["a", "b", "c", "d", "e", "f"]


def racks(n: int) -> list[str | None]:
    return [ALL_RACKS[i % len(ALL_RACKS)] for i in range(n)]


def null_racks(n: int) -> list[str | None]:
    return [None] * n


def kafka_case(
    topics: dict[str, int],
    rf: int,
    broker_racks: list[str | None],
    consumer_racks: list[str | None],
    consumer_topics: list[list[str]],
    instance_ids: list[str | None] | None = None,
) -> dict[str, Any]:
    """The snapshot RangeAssignorTest's verifyRackAssignment builds."""
    brokers = [broker(b, r) for b, r in enumerate(broker_racks)]
    parts = []
    offset = 0
    for topic, count in topics.items():
        n = len(broker_racks)
        for i in range(count):
            # Kafka's test puts RF 3 on 2 brokers (a node twice); a snapshot cannot, and
            # the racks are the same without the repeat.
            nodes = dict.fromkeys((i + j + offset) % n for j in range(rf))
            parts.append(partition(topic, i, list(nodes)))
        offset += count
    members = [
        {
            "member_id": f"consumer{i}",
            "client_id": "c",
            "rack": rack,
            "topics": consumer_topics[i],
            "group_instance_id": (instance_ids or [None] * len(consumer_racks))[i],
        }
        for i, rack in enumerate(consumer_racks)
    ]
    return doc(brokers, parts, [{"group": "g", "members": members}])


def shown(plan: Any) -> list[str]:
    return [
        ", ".join(sorted(f"{tp.topic}-{tp.partition}" for tp in plan.assignment[f"consumer{i}"]))
        for i in range(len(plan.assignment))
    ]


UNIFORM = {"t1": 6, "t2": 7, "t3": 2}
ALL3 = [["t1", "t2", "t3"]] * 3
NON_EQUAL = [["t1", "t2", "t3"], ["t1", "t2", "t3"], ["t1", "t3"]]
EQUAL5 = {"t1": 5, "t2": 5, "t3": 5}
COPART = {"t1": 6, "t2": 6, "t3": 2, "t4": 2}
PAIRS = [["t1", "t2"], ["t1", "t2"], ["t3", "t4"], ["t3", "t4"]]
ALL4 = [["t1", "t2", "t3", "t4"]] * 4
AB_BA: list[str | None] = ["a", "b", "b", "a"]

UNIFORM_PLAIN = [
    "t1-0, t1-1, t2-0, t2-1, t2-2, t3-0",
    "t1-2, t1-3, t2-3, t2-4, t3-1",
    "t1-4, t1-5, t2-5, t2-6",
]
NON_EQUAL_PLAIN = [
    "t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0",
    "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1",
    "t1-4, t1-5",
]
EQUAL5_PLAIN = [
    "t1-0, t1-1, t2-0, t2-1, t3-0, t3-1",
    "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3",
    "t1-4, t2-4, t3-4",
]
EQUAL5_NE_PLAIN = [
    "t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1",
    "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3",
    "t1-4, t3-4",
]
COPART_PLAIN = [
    "t1-0, t1-1, t1-2, t2-0, t2-1, t2-2",
    "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5",
    "t3-0, t4-0",
    "t3-1, t4-1",
]
ALL4_PLAIN = [
    "t1-0, t1-1, t2-0, t2-1, t3-0, t4-0",
    "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1",
    "t1-4, t2-4",
    "t1-5, t2-5",
]

# (topics, rf, broker racks, consumer racks, subscriptions, expected, cross-rack or None)
KAFKA_CASES = [
    # testRackAwareAssignmentWithUniformSubscription
    (UNIFORM, 3, null_racks(3), racks(3), ALL3, UNIFORM_PLAIN, None),
    (UNIFORM, 3, racks(3), null_racks(3), ALL3, UNIFORM_PLAIN, None),
    (UNIFORM, 3, racks(3), racks(3), ALL3, UNIFORM_PLAIN, 0),
    (UNIFORM, 4, racks(4), racks(3), ALL3, UNIFORM_PLAIN, 0),
    (UNIFORM, 3, racks(3), ["d", "e", "f"], ALL3, UNIFORM_PLAIN, None),
    (UNIFORM, 3, racks(3), [None, "e", "f"], ALL3, UNIFORM_PLAIN, None),
    (UNIFORM, 1, racks(3), racks(3), ALL3,
     ["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"], 0),  # noqa: E501
    (UNIFORM, 2, racks(3), racks(3), ALL3,
     ["t1-0, t1-2, t2-0, t2-2, t2-3, t3-1", "t1-1, t1-3, t2-1, t2-4, t3-0", "t1-4, t1-5, t2-5, t2-6"], 1),  # noqa: E501
    (UNIFORM, 3, racks(2), racks(3), ALL3, UNIFORM_PLAIN, 4),
    # testRackAwareAssignmentWithNonEqualSubscription
    (UNIFORM, 3, null_racks(3), racks(3), NON_EQUAL, NON_EQUAL_PLAIN, None),
    (UNIFORM, 3, racks(3), racks(3), NON_EQUAL, NON_EQUAL_PLAIN, 0),
    (UNIFORM, 1, racks(3), racks(3), NON_EQUAL,
     ["t1-0, t1-3, t2-0, t2-2, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t2-5, t3-0", "t1-2, t1-5, t3-1"], 2),  # noqa: E501
    (UNIFORM, 2, racks(3), racks(3), NON_EQUAL,
     ["t1-0, t1-2, t2-0, t2-2, t2-3, t2-5, t3-1", "t1-1, t1-3, t2-1, t2-4, t2-6, t3-0", "t1-4, t1-5"], 0),  # noqa: E501
    (UNIFORM, 3, racks(2), racks(3), NON_EQUAL, NON_EQUAL_PLAIN, 2),
    # testRackAwareAssignmentWithUniformPartitions: co-partitioning wins over racks
    (EQUAL5, 1, racks(3), racks(3), ALL3, EQUAL5_PLAIN, 10),
    (EQUAL5, 2, racks(3), racks(3), ALL3, EQUAL5_PLAIN, 5),
    (EQUAL5, 3, racks(2), racks(3), ALL3, EQUAL5_PLAIN, 3),
    # testRackAwareAssignmentWithUniformPartitionsNonEqualSubscription
    (EQUAL5, 3, null_racks(3), racks(3), NON_EQUAL, EQUAL5_NE_PLAIN, None),
    (EQUAL5, 1, racks(3), racks(3), NON_EQUAL,
     ["t1-0, t1-1, t2-0, t2-1, t2-4, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t3-4"], 9),  # noqa: E501
    (EQUAL5, 2, racks(3), racks(3), NON_EQUAL,
     ["t1-2, t2-0, t2-1, t2-3, t3-2", "t1-0, t1-3, t2-2, t2-4, t3-0, t3-3", "t1-1, t1-4, t3-1, t3-4"], 0),  # noqa: E501
    (EQUAL5, 3, racks(2), racks(3), NON_EQUAL, EQUAL5_NE_PLAIN, 2),
    # testRackAwareAssignmentWithCoPartitioning
    (COPART, 3, racks(2), AB_BA, PAIRS, COPART_PLAIN, None),
    (COPART, 2, racks(2), AB_BA, PAIRS, COPART_PLAIN, 0),
    (COPART, 1, racks(2), AB_BA, PAIRS,
     ["t1-0, t1-2, t1-4, t2-0, t2-2, t2-4", "t1-1, t1-3, t1-5, t2-1, t2-3, t2-5", "t3-1, t4-1", "t3-0, t4-0"], 0),  # noqa: E501
    (COPART, 3, racks(2), AB_BA, ALL4, ALL4_PLAIN, None),
    (COPART, 2, racks(2), AB_BA, ALL4, ALL4_PLAIN, 0),
    (COPART, 1, racks(2), AB_BA, ALL4,
     ["t1-0, t1-2, t2-0, t2-2, t3-0, t4-0", "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1", "t1-5, t2-5", "t1-4, t2-4"], 0),  # noqa: E501
    (COPART, 1, racks(3), AB_BA, ALL4,
     ["t1-0, t1-3, t2-0, t2-3, t3-0, t4-0", "t1-1, t1-4, t2-1, t2-4, t3-1, t4-1", "t1-2, t2-2", "t1-5, t2-5"], 6),  # noqa: E501
]  # fmt: skip


@pytest.mark.parametrize(
    ("topics", "rf", "brokers", "crs", "subs", "expected", "cross"), KAFKA_CASES
)
def test_range_matches_kafkas_rack_aware_range_assignor(
    topics, rf, brokers, crs, subs, expected, cross
):
    plan = plan_consumers(model(kafka_case(topics, rf, brokers, crs, subs)), "g", "range")
    assert shown(plan) == expected
    if cross is not None:
        assert plan.cross_rack == cross


def test_range_static_members_keep_their_ranges_whatever_their_member_ids():
    # RangeAssignorTest.testRackAwareStaticMemberRangeAssignmentPersistentAfterMemberIdChanges:
    # two topics of 5 partitions at RF 2 on brokers a,b,c,a,b,c, instances 1-3 on racks a-c.
    brokers = [broker(b, r) for b, r in enumerate(["a", "b", "c", "a", "b", "c"])]
    parts = [partition(t, i, [i % 6, (i + 1) % 6]) for t in ("topic1", "topic2") for i in range(5)]

    def members(ids: list[str]) -> list[dict[str, Any]]:
        return [
            {"member_id": m, "client_id": "c", "rack": r, "topics": ["topic1", "topic2"],
             "group_instance_id": f"instance{k + 1}"}
            for k, (m, r) in enumerate(zip(ids, "abc", strict=True))
        ]  # fmt: skip

    expected = {
        "instance1": ["topic1-0", "topic1-2", "topic2-0", "topic2-2"],
        "instance2": ["topic1-1", "topic1-3", "topic2-1", "topic2-3"],
        "instance3": ["topic1-4", "topic2-4"],
    }
    for ids in (["consumer1", "consumer2", "consumer3"], ["consumer1", "consumer5", "consumer4"]):
        document = doc(brokers, parts, [{"group": "g", "members": members(ids)}])
        plan = plan_consumers(model(document), "g", "range")
        by_instance = {
            f"instance{k + 1}": [str(tp) for tp in plan.assignment[m]] for k, m in enumerate(ids)
        }
        assert by_instance == expected


def test_range_orders_static_members_before_dynamic_ones():
    # RangeAssignorTest.testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions
    brokers = [broker(0)]
    parts = [partition(t, i, [0]) for t in ("topic1", "topic2") for i in range(3)]
    members = [
        {"member_id": "consumer-b", "client_id": "c", "topics": ["topic1", "topic2"],
         "group_instance_id": "instance1"},
        {"member_id": "consumer-a", "client_id": "c", "topics": ["topic1", "topic2"]},
    ]  # fmt: skip
    plan = plan_consumers(model(doc(brokers, parts, [{"group": "g", "members": members}])), "g")
    assert [str(tp) for tp in plan.assignment["consumer-b"]] == [
        "topic1-0", "topic1-1", "topic2-0", "topic2-1",
    ]  # fmt: skip
    assert [str(tp) for tp in plan.assignment["consumer-a"]] == ["topic1-2", "topic2-2"]


def test_member_ids_compare_as_java_strings():
    # U+FF5E sorts after U+1F600 in UTF-16 code units (0xFF5E > 0xD83D), before it by code point.
    a = Member("\uff5e", "c", None, ("t",))
    b = Member("\U0001f600", "c", None, ("t",))
    racks_ = {"t": {0: frozenset(), 1: frozenset()}}
    assert [str(tp) for tp in assign_range([a, b], racks_)[b.member_id]] == ["t-0"]


def test_unknown_group_and_unknown_strategy_are_plan_errors():
    m = model(kafka_case(UNIFORM, 1, racks(3), racks(3), ALL3))
    with pytest.raises(PlanError, match="group nope is not in the snapshot"):
        plan_consumers(m, "nope")
    with pytest.raises(PlanError, match="unknown strategy"):
        plan_consumers(m, "g", "roundrobin")


def test_topic_racks_are_the_alive_replicas_racks_by_partition_number():
    # Topics interleaved and partitions out of order in the snapshot, four replicas on
    # one, a dead broker (its rack does not count) and a broker without a rack.
    brokers = [
        broker(0, "a"),
        broker(1, "b"),
        broker(2, "c", alive=False),
        broker(3),
        broker(4, "d"),
    ]
    parts = [
        partition("t2", 1, [0, 1]),
        partition("t1", 2, [2, 0]),
        partition("t2", 0, [3]),
        partition("t1", 0, [0, 1, 3, 4]),
        partition("t1", 1, [2]),
    ]
    m = model(doc(brokers, parts))
    want = {
        "t2": {0: frozenset(), 1: frozenset({"a", "b"})},
        "t1": {0: frozenset({"a", "b", "d"}), 1: frozenset(), 2: frozenset({"a"})},
    }
    first = topic_racks(m, ["t1", "t2", "nope"])
    assert [(t, list(ps.items())) for t, ps in first.items()] == [
        (t, sorted(ps.items())) for t, ps in want.items()
    ]
    first["t1"].clear()  # the caller's copy: the model keeps its own
    assert topic_racks(m, {"t1"}) == {"t1": want["t1"]}


@pytest.mark.parametrize("enabled", [True, False])
def test_range_plan_leaves_the_garbage_collector_as_it_found_it(enabled):
    m = model(kafka_case(UNIFORM, 1, racks(3), racks(3), ALL3))
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        plan_consumers(m, "g", "range")
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


# --- cooperative-sticky ----------------------------------------------------------------


def members_and_racks(
    rng: random.Random, homogeneous: bool
) -> tuple[list[Member], dict[str, dict[int, frozenset[str]]]]:
    topics = {f"t{k}": rng.randint(1, 4) for k in range(rng.randint(1, 3))}
    rack_names = ["a", "b", "c"]
    racks_ = {
        t: {p: frozenset(rng.sample(rack_names, rng.randint(0, 2))) for p in range(n)}
        for t, n in topics.items()
    }
    members = []
    for i in range(rng.randint(1, 4)):
        subs = (
            tuple(topics)
            if homogeneous
            else tuple(rng.sample(list(topics), rng.randint(1, len(topics))))
        )
        rack = rng.choice([*rack_names, None])
        members.append(Member(f"m{i}", "c", rack, subs))
    return members, racks_


def most_even_counts(
    members: list[Member], racks_: dict[str, dict[int, frozenset[str]]]
) -> list[int]:
    """Sorted member counts of the assignment with the smallest sum of squares."""
    parts = [(t, p) for t in racks_ for p in racks_[t]]
    options = [[k for k, m in enumerate(members) if t in m.topics] for t, _ in parts]
    parts_options = [(part, opts) for part, opts in zip(parts, options, strict=True) if opts]
    best: list[int] | None = None
    for owners in itertools.product(*(opts for _, opts in parts_options)):
        counts = Counter(owners)
        vector = sorted(counts.get(k, 0) for k in range(len(members)))
        if best is None or sum(c * c for c in vector) < sum(c * c for c in best):
            best = vector
    return best or [0] * len(members)


def brute_force_min_cross(
    members: list[Member], racks_: dict[str, dict[int, frozenset[str]]]
) -> int:
    """Fewest cross-rack partitions over every assignment with floor/ceil counts."""
    parts = [(t, p) for t in racks_ for p in racks_[t]]
    n = len(members)
    best = None
    for owners in itertools.product(range(n), repeat=len(parts)):
        counts = Counter(owners)
        if max(counts.get(i, 0) for i in range(n)) - min(counts.get(i, 0) for i in range(n)) > 1:
            continue
        cost = sum(
            1
            for (t, p), o in zip(parts, owners, strict=True)
            if members[o].rack is not None and members[o].rack not in racks_[t][p]
        )
        best = cost if best is None else min(best, cost)
    return best or 0


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_sticky_with_equal_subscriptions_is_balanced_and_as_local_as_balance_allows(seed):
    members, racks_ = members_and_racks(random.Random(seed), homogeneous=True)
    if sum(len(v) for v in racks_.values()) > 8:
        return  # keep the brute force small
    assignment = assign_cooperative_sticky(members, racks_)
    counts = [len(assignment[m.member_id]) for m in members]
    assert max(counts) - min(counts) <= 1
    given_out = sorted((tp.topic, tp.partition) for tps in assignment.values() for tp in tps)
    assert given_out == sorted((t, p) for t in racks_ for p in racks_[t])
    assert cross_rack(members, assignment, racks_) == brute_force_min_cross(members, racks_)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_sticky_with_mixed_subscriptions_respects_them_and_balances(seed):
    members, racks_ = members_and_racks(random.Random(seed), homogeneous=False)
    assignment = assign_cooperative_sticky(members, racks_)
    subscribed = {m.member_id: set(m.topics) for m in members}
    for m, tps in assignment.items():
        assert all(tp.topic in subscribed[m] for tp in tps)
    given_out = sorted((tp.topic, tp.partition) for tps in assignment.values() for tp in tps)
    wanted = sorted(
        (t, p) for t in racks_ for p in racks_[t] if any(t in s for s in subscribed.values())
    )
    assert given_out == wanted
    # The most even counts the subscriptions allow (brute force over small cases).
    if sum(len(v) for v in racks_.values()) <= 8:
        counts = sorted(len(tps) for tps in assignment.values())
        assert counts == most_even_counts(members, racks_)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_range_gives_each_topic_out_in_floor_or_ceil_shares(seed):
    rng = random.Random(seed)
    members, racks_ = members_and_racks(rng, homogeneous=rng.random() < 0.5)
    assignment = assign_range(members, racks_)
    for t, parts in racks_.items():
        subs = [m.member_id for m in members if t in m.topics]
        if not subs:
            continue
        shares = [sum(1 for tp in assignment[m] if tp.topic == t) for m in subs]
        assert sum(shares) == len(parts)
        assert max(shares) - min(shares) <= 1


# --- CLI -------------------------------------------------------------------------------


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SELFHEAL, "plan", *args],
        check=False,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
    )


def test_cli_prints_the_assignment_and_cross_rack_count(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(kafka_case(UNIFORM, 2, racks(3), racks(3), ALL3)))
    done = run("consumers", "--snapshot", str(path), "--group", "g", "--explain")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["group"] == "g"
    assert out["cross_rack"] == 1
    assert out["assignment"]["consumer2"] == [
        {"topic": "t1", "partition": 4}, {"topic": "t1", "partition": 5},
        {"topic": "t2", "partition": 5}, {"topic": "t2", "partition": 6},
    ]  # fmt: skip
    assert "consumer0 (a): 6 partitions, 0 cross-rack" in done.stderr

    sticky = run("consumers", "--snapshot", "-", "--group", "g", "--strategy", "cooperative-sticky",
                 stdin=path.read_text())  # fmt: skip
    assert sticky.returncode == 0, sticky.stderr
    assert json.loads(sticky.stdout)["cross_rack"] == 0


def test_cli_unknown_group_exits_2(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(kafka_case(UNIFORM, 2, racks(3), racks(3), ALL3)))
    done = run("consumers", "--snapshot", str(path), "--group", "other")
    assert done.returncode == 2
    assert "group other is not in the snapshot" in done.stderr


def test_the_cli_offers_the_planners_strategies():
    from core.plan import consumers
    from remediation.plan import cli

    assert cli.STRATEGIES == consumers.STRATEGIES
