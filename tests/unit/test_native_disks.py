"""`plan disks` through the compiled core over columns (native/src/disk_plan.rs) gives
the bytes of the Python reference: the JSON the CLI writes (`disks.plan_json`, by the
core), the plan object's JSON and `--explain`'s text, on random clusters with many
moves, cordoned dirs, skipped brokers and unreachable thresholds."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.model import ClusterModel
from core.plan import disks
from schemas import native
from schemas.snapshot_columns import PartitionColumns
from tests.unit.plan_snapshots import GIB, broker, doc, partition, random_cluster
from tests.unit.test_native import both_paths, decoded
from tests.unit.test_native_columns import columns_model
from tests.unit.test_native_leaders import raw_columns_model


def disk_plan(document: dict[str, Any], threshold: float, load: Any = columns_model) -> str:
    """The plan's JSON as the CLI writes it, then as the plan object gives it, then
    `--explain`'s text."""
    m: ClusterModel = load(document)
    text = disks.plan_json(m, threshold)
    plan = disks.plan_disks(m, threshold)
    return "\n".join([text, json.dumps(plan.to_json()), disks.explain(m, plan, threshold)])


def core_text(m: ClusterModel, threshold: float) -> Any:
    """What the core gives for `plan_json` on `m`: text, moves (it refused to write
    them) or None (it refused to plan)."""
    found = disks._native(m, threshold, text=True)
    return None if found is None else found[1]


def skewed(seed: int) -> dict[str, Any]:
    """A random cluster whose first dirs are the fullest: many moves on most brokers,
    some dirs cordoned, some brokers down or with a failed dir, capacities unknown on
    some, sizes from 0 to a few GiB (ties in size: the partition index decides)."""
    rng = random.Random(seed)
    document = random_cluster(
        rng, brokers=rng.randint(1, 12), racks=2, partitions=rng.randint(0, 300),
        dirs=rng.randint(2, 5), p_dead=rng.choice([0.0, 0.1]),
        p_dir_offline=rng.choice([0.0, 0.05]), p_no_total=rng.choice([0.0, 0.3]),
        max_size=rng.choice([3, 5 * GIB]),
    )  # fmt: skip
    for b in document["brokers"]:
        for d in b["log_dirs"]:
            d["cordoned"] = rng.random() < 0.15
            if d["total_bytes"] and rng.random() < 0.05:  # past 2^50: the core refuses
                d["total_bytes"] = rng.choice([2**50, 2**50 + 1, 2**62 + 3])
    for p in document["partitions"]:
        for r in p["replicas"]:
            if r["log_dir"] is not None and rng.random() < 0.6:
                dirs = [d["path"] for d in document["brokers"][r["broker"]]["log_dirs"]
                        if d["online"]]
                r["log_dir"] = dirs[0] if dirs and r["size_bytes"] else r["log_dir"]
            if rng.random() < 0.2:
                r["size_bytes"] = rng.choice([0, 1, GIB])
    return document


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1),
       threshold=st.sampled_from([1.0, 1.01, 1.10, 1.5, float("inf")]))
def test_disk_plans_through_the_core_are_byte_identical(seed, threshold):
    document = skewed(seed)
    with pytest.MonkeyPatch.context() as mp:
        for load in (decoded, columns_model):
            fast, reference = both_paths(mp, lambda load=load: disk_plan(document, threshold, load))
            assert fast == reference
        mp.setenv("SELFHEAL_NATIVE", "1")
        if native.function("disk_plan") is not None and not huge(document):
            assert isinstance(core_text(columns_model(document), threshold), str)


def huge(document: dict[str, Any]) -> bool:
    return any((d["total_bytes"] or 0) > 2**50 for b in document["brokers"]
               for d in b["log_dirs"] if d["online"])


def test_the_core_plans_moves_on_several_brokers_and_writes_them(monkeypatch):
    # Two brokers with a full first dir, a cordoned dir on one, a broker down.
    document = doc(
        [broker(0, "a", ["/d1", "/d2", "/d3"]), broker(1, "b", ["/d1", "/d2"]),
         broker(2, "a", ["/d1", "/d2"], alive=False)],
        [partition("t", i, [(0, "/d1", GIB * (1 + i % 3)), (1, "/d1", GIB)]) for i in range(20)]
        + [partition("u", 0, [(2, "/d1", GIB)])],
    )  # fmt: skip
    document["brokers"][0]["log_dirs"][2]["cordoned"] = True
    monkeypatch.delenv("SELFHEAL_NATIVE", raising=False)
    fast, reference = both_paths(monkeypatch, lambda: disk_plan(document, 1.1))
    assert fast == reference
    written = json.loads(fast.split("\n")[0])
    moved = {(p["partition"], b, d) for p in written["partitions"]
             for b, d in zip(p["replicas"], p["log_dirs"], strict=True) if d != "any"}
    assert {b for _, b, _ in moved} == {0, 1}
    assert all(d == "/d2" for _, _, d in moved)  # never into the cordoned /d3
    # Down; then broker 0, whose empty cordoned /d3 keeps its mean out of reach.
    assert [s["broker"] for s in written["skipped"]] == [2, 0]
    assert written["skipped"][1]["reason"].startswith("threshold not reachable: /d1")
    monkeypatch.setenv("SELFHEAL_NATIVE", "1")
    if native.function("disk_plan") is not None:
        m = columns_model(document)
        assert isinstance(m.partitions, PartitionColumns)
        assert core_text(m, 1.1) + ', "skipped": ' in fast


@pytest.mark.parametrize("topic, path", [("t\u00e9", "/d2"), ("t", "/d\u00e92"),
                                         ("t", "/d\x7f2"), ("\u2603", "/d2")])
def test_a_name_json_dumps_would_escape_is_written_by_python(monkeypatch, topic, path):
    # Read raw (the reader takes UTF-8 and DEL unescaped; a quote or backslash needs an
    # escape, which it leaves to msgspec); json.dumps writes \uXXXX, which the core does
    # not: it hands the moves back and Python writes the plan.
    document = doc(
        [broker(0, "a", ["/d1", path])],
        [partition(topic, i, [(0, "/d1", GIB)]) for i in range(6)],
    )
    monkeypatch.delenv("SELFHEAL_NATIVE", raising=False)
    fast, reference = both_paths(
        monkeypatch, lambda: disk_plan(document, 1.1, raw_columns_model))
    assert fast == reference
    assert "\\" in fast.split("\n")[0]  # the escaped name is in the plan
    if native.function("disk_plan") is not None:  # a core built from this crate
        assert isinstance(core_text(raw_columns_model(document), 1.1), list)


def test_sums_past_64_bits_take_the_reference_and_give_the_same_plan(monkeypatch):
    # 18 digits each: the reader takes them, their sum on one dir leaves i64.
    big = 900_000_000_000_000_000
    document = doc(
        [broker(0, "a", ["/d1", "/d2"], total=None)],
        [partition("t", i, [(0, "/d1", big)]) for i in range(12)]
        + [partition("t", 12, [(0, "/d2", 5)])],
    )
    monkeypatch.delenv("SELFHEAL_NATIVE", raising=False)
    fast, reference = both_paths(monkeypatch, lambda: disk_plan(document, 1.1))
    assert fast == reference
    assert '"/d2"' in fast.split("\n")[0]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_cores_dir_sums_are_the_models_dir_bytes(seed):
    # Over columns, before any per-dir index: the core's sums; the reference's come from
    # the index. The same keys, in the same order, and the same ints.
    document = skewed(seed)
    with pytest.MonkeyPatch.context() as mp:
        fast, reference = both_paths(mp, lambda: list(columns_model(document).dir_bytes.items()))
        assert fast == reference
        mp.setenv("SELFHEAL_NATIVE", "1")
        if native.function("dir_sums") is not None:
            m = columns_model(document)
            assert m._dir_sums_native() == dict(reference)
            assert "replicas_by_dir" not in m.__dict__  # no index made for them
