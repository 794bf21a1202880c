"""The offline planner's spread: the busiest receiver copies close to the least possible.

Small random clusters are checked against the exact optimum (every plan that keeps the
rules, tests/unit/spread_cases.py), large ones against the lower bound. The clusters:
dead brokers, failed dirs, 2-6 racks, RF 2-4, heavy-tailed sizes.
"""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from core.plan import recovery
from core.plan.bounds import fewest_replicas, lower_bounds
from core.plan.offline import explain, plan_offline, received, work
from core.plan.spread import Job, Receiver, spread
from tests.unit.plan_snapshots import model
from tests.unit.spread_cases import feasible, optimum, skewed_cluster


def _cluster(draw: st.DrawFn, brokers: tuple[int, int], partitions: tuple[int, int]):
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(*brokers))
    return model(skewed_cluster(
        rng, brokers=n, racks=draw(st.integers(2, min(6, n))),
        partitions=draw(st.integers(*partitions)), rf=draw(st.integers(2, 4)),
        dead=draw(st.integers(0, 1 if n < 8 else 2)), failed_dirs=draw(st.integers(0, 3))))


@st.composite
def small(draw: st.DrawFn):
    return _cluster(draw, (3, 7), (1, 8))


@st.composite
def large(draw: st.DrawFn):
    return _cluster(draw, (12, 30), (300, 700))


def loads(jobs: list[Job], new: dict[int, tuple[int, ...]]) -> tuple[Counter, Counter]:
    got: Counter[int] = Counter()
    count: Counter[int] = Counter()
    for j in jobs:
        for b in new[j.index]:
            got[b] += j.size
            count[b] += 1
    return got, count


@settings(max_examples=300, deadline=None, derandomize=True)
@given(m=small())
def test_small_clusters_come_within_5_percent_of_the_exact_optimum(m):
    jobs, receivers, _ = work(m)
    if not jobs or sum(j.need for j in jobs) > 9:
        return  # the brute force would take too long; `large` covers the rest
    new = spread(jobs, receivers)
    for j in jobs:  # every plan the planner makes is one the brute force tries
        assert tuple(sorted(new[j.index])) in feasible(j, receivers)
    got, count = loads(jobs, new)
    best_bytes, best_count = optimum(jobs, receivers)
    _, fewest = optimum(jobs, receivers, count_only=True)
    assert max(got.values()) <= 1.05 * best_bytes
    # Replicas come second: the reference is the fewest among the plans at the least
    # bytes. Fewest by count alone can be lower (a seed sweep has 4 of 16,613 cases
    # where every byte-optimal plan gives one broker 4 or 5 and a count-only plan 2 or
    # 3), and the objective puts bytes first.
    assert max(count.values()) <= 1.25 * best_count + 1
    assert lower_bounds(jobs, receivers) <= (best_bytes, fewest)  # the bound is one
    # and so is the replica bound among the plans at the least bytes
    assert fewest_replicas(jobs, receivers, best_bytes) <= best_count


@settings(max_examples=40, deadline=None, derandomize=True)
@given(m=large())
def test_large_clusters_come_within_10_percent_of_the_lower_bound(m):
    jobs, receivers, _ = work(m)
    if not jobs:
        return
    got, count = loads(jobs, spread(jobs, receivers))
    least, fewest = lower_bounds(jobs, receivers)
    assert max(got.values()) <= 1.10 * least
    # Replicas come second: against the fewest any plan can give whose busiest receiver
    # gets no more bytes than this one's (by count alone, a replica the size of the peak
    # would leave its broker free for others).
    fewest = max(fewest, fewest_replicas(jobs, receivers, max(got.values())))
    assert max(count.values()) <= 1.25 * fewest + 1


def test_a_three_move_cycle_lowers_the_peak_where_no_move_swap_or_chain_does():
    # Two racks, each job on one; the greedy ends with 1164 + 166 on broker 0. The
    # optimum moves 166 from 0 to 4, 933 from 4 to 1, and 414 from 1 to 3.
    receivers = [Receiver(0, "r0", False, 1615), Receiver(1, "r0", False, 4007),
                 Receiver(3, "r1", False, 5156), Receiver(4, "r1", False, 2721)]
    kept = frozenset({"r0", "r1"})
    jobs = [Job(index, size, 1, kept, frozenset(lists)) for index, size, lists in (
        (0, 1164, (1, 2, 3)), (5, 933, (0, 2, 3)), (2, 414, (0, 2, 4)),
        (3, 316, (1, 2, 3)), (4, 215, (0, 2, 3)), (6, 166, (1, 2, 3)))]
    got, _ = loads(jobs, spread(jobs, receivers))
    assert max(got.values()) == 1164 == optimum(jobs, receivers)[0]


def test_a_broker_on_the_path_passes_two_replicas_on_where_one_is_not_enough():
    # Largest first: 2136 to broker 1 (it holds less), 720 and 538 to 0, 124 (it may
    # not go to 0) to 1: 2260 on 1. No move, swap, chain or one-replica path lowers it;
    # 2136 to 0 with 720 and 538 back to 1 does: the optimum, 2136.
    receivers = [Receiver(0, None, False, 1), Receiver(1, None, False, 0)]
    jobs = [Job(i, size, 1, frozenset(), frozenset(exclude)) for i, size, exclude in
            ((0, 2136, ()), (1, 720, ()), (2, 538, ()), (3, 124, (0,)))]
    got, _ = loads(jobs, spread(jobs, receivers))
    assert max(got.values()) == 2136 == optimum(jobs, receivers)[0]


def test_the_greedy_is_undone_where_one_move_lowers_the_peak():
    # Largest first: 3 then 3 go to brokers 0 and 1, then 2, 2, 2: one broker has 7 of
    # the 12 bytes. A swap of a 3 with a 2 gives 6 and 6, the optimum.
    receivers = [Receiver(0, None, False, 0), Receiver(1, None, False, 0)]
    jobs = [Job(i, size, 1, frozenset(), frozenset({9})) for i, size in
            enumerate((3, 3, 2, 2, 2))]
    got, _ = loads(jobs, spread(jobs, receivers))
    assert sorted(got.values()) == [6, 6]


def test_the_greedy_keeps_room_on_the_rack_the_rule_must_fill():
    # Rack r1's three healthy brokers must take every job whose survivors span r0 and
    # r2. By bytes alone the largest job (10.7 GB, free to go to r1 or r2) lands on r1
    # first, and no chain of moves undoes it: 1.21x the bound, where an integer program
    # is within 0.1% of it. Counting r1's share of what is still to come, within 10%.
    m = model(skewed_cluster(random.Random(1366269267), brokers=13, racks=3, partitions=544,
                             rf=4, dead=0, failed_dirs=3))
    jobs, receivers, _ = work(m)
    got, _ = loads(jobs, spread(jobs, receivers))
    assert max(got.values()) <= 1.10 * lower_bounds(jobs, receivers)[0]


def test_ties_go_to_fewer_replicas_received_then_less_held_then_the_lower_id():
    receivers = [Receiver(b, None, False, held) for b, held in ((0, 5), (1, 5), (2, 1))]
    jobs = [Job(0, 4, 1, frozenset(), frozenset()), Job(1, 0, 1, frozenset(), frozenset()),
            Job(2, 0, 1, frozenset(), frozenset())]
    # The 4-byte job to broker 2 (it holds the least); the first empty one to broker 0
    # (equal to 1 but for the id), the second to broker 1 (0 has a replica now).
    assert spread(jobs, receivers) == {0: (2,), 1: (0,), 2: (1,)}


def test_the_same_input_gives_the_same_plan():
    m = model(skewed_cluster(random.Random(7), brokers=12, racks=4, partitions=400, rf=3,
                             dead=1, failed_dirs=3))
    assert plan_offline(m) == plan_offline(m)


def test_explain_states_the_objective_the_bound_and_the_recovery_time():
    m = model(skewed_cluster(random.Random(3), brokers=12, racks=4, partitions=400, rf=3,
                             dead=1, failed_dirs=3))
    plan = plan_offline(m)
    text = explain(m, plan, rate=50 << 20)
    got = received(m, plan.reassignment.partitions)
    top = recovery.busiest(got)
    assert top is not None
    assert "objective: among plans that keep KIP-36's rack spread" in text
    assert f"busiest receiver: broker {top.broker} copies" in text
    assert "(the lower bounds)" in text
    assert f"recovery: about {round(top.bytes / (50 << 20) / 60)} min at 50 MiB/s; broker " \
           f"{top.broker} copies the most" in text
