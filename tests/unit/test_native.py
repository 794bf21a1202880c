"""The compiled core (native/) and the pure-Python reference give the same plans.

Each case runs the planner twice in one process, `SELFHEAL_NATIVE=0` and not, and
compares the plan's JSON byte for byte. Where no Rust toolchain built the core, both
runs take the reference and the comparison still holds.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from copy import deepcopy
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.model import ClusterModel
from core.plan import disks, leaders, offline
from schemas import native
from schemas.snapshot import DirReplicas
from schemas.snapshot_columns import read_columns
from schemas.snapshot_decode import decode_snapshot
from tests.unit.plan_snapshots import GIB, broker, clusters, doc, model, partition
from tests.unit.test_native_columns import columns_model


def both_paths(monkeypatch: pytest.MonkeyPatch, run: Callable[[], Any]) -> tuple[Any, Any]:
    """(native, reference) results of `run`."""
    monkeypatch.setenv("SELFHEAL_NATIVE", "1")
    fast = run()
    monkeypatch.setenv("SELFHEAL_NATIVE", "0")
    return fast, run()


def decoded(document: dict[str, Any]) -> ClusterModel:
    """Through the typed decoder, as the CLI reads: the model builds its own dir index."""
    snapshot = decode_snapshot(json.dumps(document))
    assert snapshot is not None
    return ClusterModel(snapshot)


def disk_plan(document: dict[str, Any], threshold: float, load: Callable[..., ClusterModel]) -> str:
    m = load(document)
    plan = disks.plan_disks(m, threshold)
    return json.dumps(plan.to_json()) + disks.explain(m, plan, threshold)


def test_selfheal_native_0_turns_the_core_off(monkeypatch):
    monkeypatch.setenv("SELFHEAL_NATIVE", "0")
    assert native.core() is None


def test_where_cargo_is_the_core_is_built_and_on_by_default(monkeypatch):
    # `make deps` builds it wherever cargo is; without cargo it says so once and the
    # reference runs.
    monkeypatch.delenv("SELFHEAL_NATIVE", raising=False)
    if shutil.which("cargo"):
        assert native.core() is not None


@settings(max_examples=120, deadline=None)
@given(document=clusters(), threshold=st.sampled_from([1.0, 1.05, 1.10, 1.25]))
def test_disk_plans_are_byte_identical_on_random_clusters(document, threshold):
    with pytest.MonkeyPatch.context() as mp:
        for load in (model, decoded, columns_model):
            fast, reference = both_paths(mp, lambda load=load: disk_plan(document, threshold, load))
            assert fast == reference


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), threshold=st.sampled_from([1.0, 1.02, 1.10]))
def test_disk_plans_are_byte_identical_with_many_moves(seed, threshold):
    rng = random.Random(seed)
    bs = [broker(b, "a", [f"/d{k}" for k in range(rng.randint(2, 5))],
                 total=rng.choice([None, 1000 * GIB])) for b in range(rng.randint(1, 4))]
    parts = []
    for i in range(rng.randint(50, 300)):
        b = rng.randrange(len(bs))
        dirs = [d["path"] for d in bs[b]["log_dirs"]]
        path = rng.choices(dirs, weights=[1 + 10 * (k == 0) for k in range(len(dirs))])[0]
        parts.append(partition("t", i, [(b, path, rng.choice([0, 1, 7, GIB, 3 * GIB + 1]))]))
    document = doc(bs, parts)
    with pytest.MonkeyPatch.context() as mp:
        for load in (decoded, columns_model):  # columns: as `plan disks` reads
            fast, reference = both_paths(mp, lambda load=load: disk_plan(document, threshold, load))
            assert fast == reference


# Sizes around 2**53, where an int and a float stop meaning the same number, and past
# 2**63, which the core hands back to the reference.
sizes = st.one_of(
    st.integers(0, 10 * GIB), st.integers(2**53 - 4, 2**53 + 4), st.integers(0, 2**70)
)


@settings(max_examples=300, deadline=None)
@given(
    on_source=st.lists(sizes, max_size=40),
    others=st.lists(st.integers(0, 2**60), min_size=1, max_size=4),
    capacities=st.lists(st.floats(1.0, 1e19), min_size=5, max_size=5),
    threshold=st.floats(1.0, 2.0),
)
def test_draining_one_dir_is_exact_for_any_int(on_source, others, capacities, threshold):
    dirs = [disks.DirUsage(f"/d{k}", capacities[k], used)
            for k, used in enumerate([sum(on_source), *others])]
    mean = disks.mean_ratio(dirs)
    limit = {d.path: threshold * mean * d.capacity for d in dirs}
    bucket = DirReplicas(0, "/d0", list(on_source), list(range(len(on_source))))

    def drain() -> tuple[list[tuple[int, str, str, int]], list[int]]:
        mine = deepcopy(dirs)
        return disks._drain(bucket, mine[0], mine, limit), [d.used for d in mine]

    with pytest.MonkeyPatch.context() as mp:
        fast, reference = both_paths(mp, drain)
    assert fast == reference


def indexes(m: ClusterModel) -> tuple[Any, ...]:
    by_dir = {k: (d.sizes, d.partitions) for k, d in m.replicas_by_dir.items()}
    return by_dir, m.broker_totals, m.dir_bytes


@settings(max_examples=120, deadline=None)
@given(document=clusters(max_brokers=10, max_partitions=60))
def test_the_model_indexes_and_the_plans_on_them_are_the_same(document):
    def run() -> tuple[Any, ...]:
        plans = tuple(
            json.dumps(plan(decoded(document)).to_json())
            for plan in (offline.plan_offline, leaders.plan_leaders)
        )
        return indexes(decoded(document)), plans

    with pytest.MonkeyPatch.context() as mp:
        fast, reference = both_paths(mp, run)
    assert fast == reference


def test_sizes_past_64_bits_take_the_reference_and_give_the_same_indexes(monkeypatch):
    huge = 2**64 + 3
    document = doc(
        [broker(0, "a", ["/d1", "/d2"]), broker(1, "b", ["/d1"], alive=False)],
        [partition("t", 0, [(0, "/d1", huge), (1, "/d1", 1)]),
         partition("t", 1, [(0, "/d2", 2**63 - 1), (1, "/d1", 2**63 - 1)])],
    )
    fast, reference = both_paths(monkeypatch, lambda: indexes(decoded(document)))
    assert fast == reference
    assert fast[1].sizes == {0: huge + 2**63 - 1, 1: 2**63}


def break_one_reference(document: dict[str, Any], how: str, rng: random.Random) -> None:
    """Make one cross-reference of a snapshot wrong (or, for `split`, still right)."""
    parts = document["partitions"]
    if not parts:
        return
    p = rng.choice(parts)
    r = rng.choice(p["replicas"])
    if how == "unknown broker":
        r["broker"] = 10_000
    elif how == "unknown dir":
        r["log_dir"] = "/nowhere"
    elif how == "broker twice":
        p["replicas"].append(dict(r))
    elif how == "leader elsewhere":
        p["leader"] = 10_000
    elif how == "isr elsewhere":
        p["isr"] = [*p["isr"], 10_000]
    elif how == "partition twice":
        parts.append(dict(p))
    elif how == "split":  # the topic's partitions in two runs, numbers still distinct
        parts.append({**p, "topic": "t-split", "partition": 1})
        parts.insert(0, {**p, "topic": "t-split", "partition": 0})
    elif how == "split twice":
        parts.append({**p, "topic": "t-split"})
        parts.insert(0, {**p, "topic": "t-split"})


@settings(max_examples=200, deadline=None)
@given(
    document=clusters(max_brokers=6, max_partitions=20),
    how=st.sampled_from(["none", "unknown broker", "unknown dir", "broker twice",
                         "leader elsewhere", "isr elsewhere", "partition twice", "split",
                         "split twice"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_decoder_refuses_and_accepts_the_same_snapshots(document, how, seed):
    break_one_reference(document, how, random.Random(seed))
    text = json.dumps(document)
    with pytest.MonkeyPatch.context() as mp:
        fast, reference = both_paths(mp, lambda: decode_snapshot(text))
        mp.setenv("SELFHEAL_NATIVE", "1")
        columns = read_columns(text.encode())  # the compiled reader, straight to columns
    assert fast == reference
    assert (columns is None) == (reference is None) or not shutil.which("cargo")
    if columns is not None:
        assert replace(columns, partitions=tuple(columns.partitions)) == reference
