"""The consumer planners: the compiled core and the Python reference give the same
assignment, member by member and partition by partition (tests/unit/test_native.py
holds the cluster planners). Where no Rust toolchain built the core, both runs take
the reference and the comparisons still hold."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.plan import sticky_assignor
from core.plan.consumers import assign_cooperative_sticky, assign_range
from core.plan.flow import MinCostFlow
from schemas import native
from schemas.snapshot import Member
from tests.unit.test_native import both_paths
from tests.unit.test_plan_consumers_properties import random_current, random_group

RACKS = ("a", "b", "c")


def big_group(rng: random.Random, members: int, partitions: int, patterns: int):
    """A group past the planner's exact-owner size: `patterns` distinct subscriptions
    (0: every member on every topic), partitions on one to three racks or none."""
    topics = {f"t{k}": rng.randint(1, partitions) for k in range(rng.randint(1, 6))}
    racks = {
        t: {p: frozenset(rng.sample(RACKS, rng.choice([0, 1, 2, 2, 3]))) for p in range(n)}
        for t, n in topics.items()
    }
    names = list(racks)
    subs = [tuple(rng.sample(names, rng.randint(1, len(names)))) for _ in range(patterns)]
    group = [
        Member(
            f"m{rng.getrandbits(16):04x}-{i}", "c", rng.choice([*RACKS, None]),
            subs[i % len(subs)] if subs else tuple(names),
            f"s{i}" if rng.random() < 0.1 else None,
        )
        for i in range(members)
    ]  # fmt: skip
    return group, racks


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sticky=st.booleans())
def test_sticky_is_the_same_through_the_native_flow_on_small_groups(seed, sticky):
    rng = random.Random(seed)
    members, racks = random_group(rng, 7, 12)
    current = random_current(rng, members, racks) if sticky else None
    with pytest.MonkeyPatch.context() as mp:
        fast, reference = both_paths(mp, lambda: assign_cooperative_sticky(members, racks, current))
    assert fast == reference


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), patterns=st.sampled_from([0, 3, 1000]))
def test_sticky_is_the_same_through_the_native_flow_on_big_mixed_groups(seed, patterns):
    rng = random.Random(seed)
    members, racks = big_group(rng, rng.randint(60, 150), 120, patterns)
    current = assign_range(members[rng.randint(0, 20) :], racks) if rng.random() < 0.5 else None
    with pytest.MonkeyPatch.context() as mp:
        fast, reference = both_paths(mp, lambda: assign_cooperative_sticky(members, racks, current))
    assert list(fast.items()) == list(reference.items())


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_range_is_the_same_through_the_native_path(seed):
    rng = random.Random(seed)
    members, racks = random_group(rng, 9, 14) if seed % 2 else big_group(rng, 80, 60, seed % 4)
    with pytest.MonkeyPatch.context() as mp:
        fast, reference = both_paths(mp, lambda: assign_range(members, racks))
    assert list(fast.items()) == list(reference.items())


def levelled(seed: int) -> tuple[MinCostFlow, list[int]]:
    """A random flow graph of the sticky planner's shape (source 0 -> pools -> member
    nodes, sink 1): costs 0, 1 or a cross-rack weight, ties everywhere."""
    rng = random.Random(seed)
    flow = MinCostFlow(2)
    pools = [flow.node() for _ in range(rng.randint(1, 6))]
    members = [flow.node() for _ in range(rng.randint(1, 8))]
    for p in pools:
        flow.add(0, p, rng.randint(0, 9), 0)
        for k in rng.sample(members, rng.randint(1, len(members))):
            flow.add(p, k, 50, rng.choice([0, 0, 1, 51]))
        if rng.random() < 0.3:
            flow.add(p, rng.choice(pools), rng.randint(1, 5), 1)
    return flow, members


@pytest.mark.parametrize("seed", range(60))
def test_the_native_flow_leaves_every_edge_as_the_reference_does(seed, monkeypatch):
    def run() -> tuple[list[int], int, int]:
        flow, members = levelled(seed)
        given = range(0, len(flow.initial), 2)  # the levels _fill adds are its own
        supply = [e for e in flow.graph[0] if e % 2 == 0]
        sticky_assignor._fill(flow, members, [1 + k % 3 for k in members], 52 * 51, 0, 1)
        placed = sum(flow.used(e) for e in supply)
        return [flow.used(e) for e in given], placed, sum(flow.initial[e] for e in supply)

    fast, reference = both_paths(monkeypatch, run)
    assert fast == reference
    assert fast[1] == fast[2]  # every partition placed


def test_a_capacity_past_the_cores_bound_runs_the_reference(monkeypatch):
    flow = MinCostFlow(3)
    flow.add(0, 2, 1 << 40, 0)
    compiled = native.function("sticky_flow")
    if compiled is not None:
        assert compiled(3, flow.to, flow.cap, flow.cost, [2], [1 << 40], 1, 0, 1) is None
    sticky_assignor._fill(flow, [2], [1 << 40], 1, 0, 1)
    assert flow.used(0) == 1 << 40


def test_a_cost_past_32_bits_runs_the_reference(monkeypatch):
    # The core packs the given arcs' costs in i32; past that the reference plans, alike.
    def run() -> tuple[bool, list[int]]:
        flow = MinCostFlow(4)
        flow.add(0, 2, 3, 0)
        flow.add(2, 3, 3, 1 << 31)
        flow.add(2, 3, 3, (1 << 31) - 1)
        compiled = native.function("sticky_flow")
        refused = compiled is None or compiled(
            4, flow.to, flow.cap, flow.cost, [3], [3], 1 << 33, 0, 1
        ) is None
        sticky_assignor._fill(flow, [3], [3], 1 << 33, 0, 1)
        return refused, [flow.used(e) for e in (0, 2, 4)]

    fast, reference = both_paths(monkeypatch, run)
    assert fast == reference == (True, [3, 0, 3])  # all over the cheaper of the two


def test_a_core_built_from_an_older_crate_leaves_its_missing_functions_to_the_reference():
    assert native.function("a_function_no_crate_has") is None


@pytest.mark.parametrize("seed", range(20))
def test_fan_out_adds_the_edges_one_add_each_would(seed):
    rng = random.Random(seed)
    one, bulk = MinCostFlow(12), MinCostFlow(12)
    for flow in (one, bulk):
        flow.add(0, 1, 3, 0)
    heads = rng.sample(range(2, 12), rng.randint(0, 10))
    costs = [rng.choice([0, 1, 7]) for _ in heads]
    edges = [one.add(1, b, 9, c) for b, c in zip(heads, costs, strict=True)]
    assert list(bulk.fan_out(1, heads, 9, costs)) == edges
    assert (bulk.graph, bulk.to, bulk.cap, bulk.cost, bulk.initial) == (
        one.graph, one.to, one.cap, one.cost, one.initial,
    )  # fmt: skip
