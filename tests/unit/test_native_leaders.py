"""`plan leaders` through the compiled core (native/src/leaders.rs) gives the bytes of
the Python reference: plan JSON (the plan's and the one the core writes itself,
native/src/leader_json.rs) and `--explain` text, on random clusters shaped to need
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
from schemas import native
from schemas.snapshot import parse_snapshot
from schemas.snapshot_columns import PartitionColumns
from tests.unit.plan_snapshots import broker, doc, model, partition, random_cluster
from tests.unit.test_native import both_paths, decoded
from tests.unit.test_native_columns import columns_model


def leader_plan(document: dict[str, Any], load: Any = decoded) -> str:
    """The plan's JSON as the CLI writes it (`plan_json`: by the core over columns),
    then as the plan object gives it, then `--explain`'s text."""
    m: ClusterModel = load(document)
    plan = leaders.plan_leaders(m)
    return "\n".join([leaders.plan_json(m), json.dumps(plan.to_json()), leaders.explain(m, plan)])


def raw_columns_model(document: dict[str, Any]) -> ClusterModel:
    """`columns_model`, strings written unescaped (UTF-8, DEL): the reader takes those."""
    raw = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    snapshot = parse_snapshot(raw, columns=True)
    if native.core() is not None:
        assert isinstance(snapshot.partitions, PartitionColumns)
    return ClusterModel(snapshot)


def core_json(document: dict[str, Any], targets: Any = None) -> str | None:
    """What the core's writer gives for `document` read into columns (None: refused)."""
    m = raw_columns_model(document)
    assert isinstance(m.partitions, PartitionColumns)
    write = native.function("leader_plan_json")
    return write(m.partitions.columns, leaders._native_targets(m) if targets is None else targets)


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
        assert core_json(piled(1, sparse_ids=False)) is not None  # and writes the JSON


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


@pytest.mark.parametrize("topic", ["t\u00e9", "t\x7f", "\u2603"])
def test_a_topic_name_json_dumps_would_escape_is_written_by_python(monkeypatch, topic):
    # Read raw (the reader takes UTF-8 and DEL unescaped); json.dumps writes them as
    # \uXXXX, which the core does not: it refuses and Python writes the plan.
    document = doc(
        [broker(0, "a"), broker(1, "b")],
        [partition(topic, i, [0, 1]) for i in range(4)] + [partition("plain", 0, [0, 1])],
    )
    monkeypatch.delenv("SELFHEAL_NATIVE", raising=False)
    if native.function("leader_plan_json") is not None:  # a core built from this crate
        assert core_json(document) is None
    fast, reference = both_paths(monkeypatch, lambda: leader_plan(document, raw_columns_model))
    assert fast == reference
    assert "\\u" in fast  # the escaped name is in the plan


def test_plain_topic_names_with_any_printable_byte_are_written_by_the_core(monkeypatch):
    topic = "a b~!#$%&'()*+,-./:;<=>?@[]^_`{|}"  # everything json.dumps leaves as it is
    document = doc(
        [broker(0, "a"), broker(1, "b")], [partition(topic, i, [0, 1]) for i in range(4)]
    )
    monkeypatch.delenv("SELFHEAL_NATIVE", raising=False)
    if native.function("leader_plan_json") is not None:  # a core built from this crate
        assert core_json(document) is not None
    fast, reference = both_paths(monkeypatch, lambda: leader_plan(document, columns_model))
    assert fast == reference


def test_the_writer_refuses_a_target_naming_no_partition(monkeypatch):
    document = doc([broker(0, "a"), broker(1, "b")], [partition("t", 0, [0, 1])])
    monkeypatch.delenv("SELFHEAL_NATIVE", raising=False)
    if native.function("leader_plan_json") is not None:  # a core built from this crate
        assert core_json(document, [(1, 1)]) is None
        assert core_json(document, [(0, 1)]) is not None
