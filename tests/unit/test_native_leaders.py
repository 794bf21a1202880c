"""`plan leaders` through the compiled core (native/src/leaders.rs) gives the bytes of
the Python reference: plan JSON and `--explain` text, on random clusters shaped to need
every step (orphans, the three direct passes, chains, rack chains, undoing detours)."""

from __future__ import annotations

import json
import random
import shutil
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.model import ClusterModel
from core.plan import leaders
from tests.unit.plan_snapshots import broker, doc, model, partition, random_cluster
from tests.unit.test_native import both_paths, decoded
from tests.unit.test_native_columns import columns_model


def leader_plan(document: dict[str, Any], load: Any = decoded) -> str:
    m: ClusterModel = load(document)
    plan = leaders.plan_leaders(m)
    return json.dumps(plan.to_json()) + leaders.explain(m, plan)


def piled(seed: int, sparse_ids: bool) -> dict[str, Any]:
    """A random cluster with leadership piled on a few brokers (most partitions move),
    low replication (few candidates: chains), a few racks (rack chains), dead brokers
    and failed dirs (orphans); with `sparse_ids`, broker ids far apart and past 2^32."""
    rng = random.Random(seed)
    document = random_cluster(
        rng, brokers=rng.randint(1, 30), racks=rng.randint(1, 4),
        partitions=rng.randint(0, 400), max_rf=rng.choice([1, 2, 3, 4]),
        p_dead=rng.choice([0.0, 0.1, 0.3]), p_dir_offline=0.1,
        p_no_rack=rng.choice([0.0, 0.2]), p_out_of_sync=rng.choice([0.0, 0.3]),
    )  # fmt: skip
    heavy = rng.randint(1, 3)
    for p in document["partitions"]:
        if p["isr"] and rng.random() < 0.7:
            p["leader"] = min(p["isr"], key=lambda b: b % heavy)
        elif rng.random() < 0.1:
            p["leader"] = -1
    if sparse_ids:
        ids = {b["id"]: 2**40 + 1_000_003 * b["id"] for b in document["brokers"]}
        for b in document["brokers"]:
            b["id"] = ids[b["id"]]
        for p in document["partitions"]:
            p["leader"] = ids.get(p["leader"], p["leader"])
            p["isr"] = [ids[b] for b in p["isr"]]
            for r in p["replicas"]:
                r["broker"] = ids[r["broker"]]
    return document


def test_the_core_plans_where_it_is_built(monkeypatch):
    # Without this the comparisons below could hold by running the reference twice.
    monkeypatch.delenv("SELFHEAL_NATIVE", raising=False)
    if shutil.which("cargo"):
        for load in (decoded, columns_model):
            assert leaders._native_targets(load(piled(1, sparse_ids=False))) is not None


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sparse_ids=st.booleans())
def test_leader_plans_are_byte_identical_on_random_clusters(seed, sparse_ids):
    document = piled(seed, sparse_ids)
    with pytest.MonkeyPatch.context() as mp:
        for load in (decoded, model, columns_model):
            fast, reference = both_paths(mp, lambda load=load: leader_plan(document, load))
            assert fast == reference


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_leader_plans_are_byte_identical_with_thousands_of_partitions(seed):
    rng = random.Random(seed)
    document = random_cluster(
        rng, brokers=rng.randint(20, 60), racks=rng.randint(2, 5),
        partitions=rng.randint(2000, 5000), p_dead=0.05, p_dir_offline=0.02,
    )  # fmt: skip
    for p in document["partitions"]:
        if p["isr"] and rng.random() < 0.5:
            p["leader"] = min(p["isr"])
    with pytest.MonkeyPatch.context() as mp:  # as the CLI reads: columns from the bytes
        fast, reference = both_paths(mp, lambda: leader_plan(document, columns_model))
    assert fast == reference


def test_a_broker_id_past_64_bits_takes_the_reference(monkeypatch):
    huge = 2**64 + 7
    document = doc(
        [broker(0, "a"), broker(1, "b"), broker(huge, "a")],
        [partition("t", i, [0, 1, huge]) for i in range(6)],
    )
    monkeypatch.delenv("SELFHEAL_NATIVE", raising=False)
    assert leaders._native_targets(model(document)) is None
    for load in (model, lambda d: columns_model(d, taken=False)):  # refused: the records
        fast, reference = both_paths(monkeypatch, lambda load=load: leader_plan(document, load))
        assert fast == reference
    assert leaders.plan_leaders(model(document)).election  # all six led by 0: some move
