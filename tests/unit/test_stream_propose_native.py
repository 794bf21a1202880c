"""The job plans from the model `selfheal plan` reads (issue 33: one model for the job and
the CLI): the kept snapshot is the compiled core's columns, a failure's delta is applied
to them in the core, and the actions are those of the reference path (`SELFHEAL_NATIVE=0`:
records, the delta applied in Python), byte for byte, on random clusters and histories.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import native
from schemas.snapshot import snapshot_from_dict
from schemas.snapshot_columns import PartitionColumns
from schemas.snapshot_delta import apply_delta, check_delta, make_delta, snapshot_with_delta
from schemas.snapshot_types import Snapshot
from streams.detect_types import DEAD_BROKER, FIX_OFFLINE, LOGDIR_EVENT, Decision, SnapshotRef
from streams.keeper import decode
from streams.propose import Proposer, mark_cordoned, mark_offline, with_dirs_marked
from tests.unit.plan_snapshots import GIB, partition, random_cluster

T0 = 1_800_000_000_000
REF = SnapshotRef("selfheal.cluster-snapshots", 0, 42, T0)
DELTA_REF = SnapshotRef("selfheal.cluster-snapshots", 0, 50, T0 + 500)
CREATED = "2027-01-15T08:00:01.000Z"


def history(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any], int, str]:
    """A random base snapshot; then, on one alive broker, one of its online dirs fails
    (its replicas' dir unknown, as DescribeLogDirs says), a partition is created on it, one
    on it deleted, one on it grows: the document after, the broker and the dir."""
    while True:
        base = random_cluster(rng, brokers=rng.randint(2, 7), racks=rng.randint(1, 3),
                              partitions=rng.randint(1, 40))
        alive = [b for b in base["brokers"]
                 if b["alive"] and any(d["online"] for d in b["log_dirs"])]
        if alive:
            break
    b = rng.choice(alive)
    path = rng.choice([d["path"] for d in b["log_dirs"] if d["online"]])
    now = copy.deepcopy(base)
    now["taken_at"] = "2026-11-22T00:00:05Z"
    mine = [p for p in now["partitions"] if any(r["broker"] == b["id"] for r in p["replicas"])]
    if mine and rng.random() < 0.5:
        now["partitions"].remove(rng.choice(mine))
    for p in now["partitions"]:
        for r in p["replicas"]:
            if r["broker"] == b["id"] and rng.random() < 0.2:
                r["size_bytes"] += rng.randint(1, GIB)
    if rng.random() < 0.7:
        other = rng.choice([x["id"] for x in base["brokers"] if x["id"] != b["id"]])
        peer = next(x for x in base["brokers"] if x["id"] == other)
        now["partitions"].append(partition(
            f"new{rng.randint(0, 2)}", rng.randint(0, 3),
            [(b["id"], path, GIB), (other, peer["log_dirs"][0]["path"], GIB)]))
        keys = [(p["topic"], p["partition"]) for p in now["partitions"]]
        if len(set(keys)) != len(keys):
            now["partitions"].pop()
    mark_offline(now, ((b["id"], path),))
    for p in now["partitions"]:
        for r in p["replicas"]:
            if (r["broker"], r["log_dir"]) == (b["id"], path):
                r["log_dir"] = None
    return base, now, b["id"], path


def decision(kind: str, broker: int, path: str | None, delta: bool,
             cordoned: tuple[tuple[int, str], ...] = ()) -> Decision:
    return Decision(type=kind, cluster_id="c1", event_time=T0, trigger_kind=LOGDIR_EVENT,
                    broker=broker, log_dir=path, snapshot=REF,
                    offline_dirs=((broker, path),) if path else (), cordoned=cordoned,
                    delta=DELTA_REF if delta else None, reason="the failure")


def actions(base: dict[str, Any], delta: bytes, d: Decision) -> list[dict[str, Any]]:
    raw = msgspec.json.encode(base)
    proposer = Proposer(lambda ref, cluster_id: raw, read_delta=lambda ref, cluster_id: delta)
    return [a.to_dict() for a in proposer.actions(d, CREATED)]


def both(monkeypatch: pytest.MonkeyPatch, run: Any) -> tuple[Any, Any]:
    monkeypatch.setenv("SELFHEAL_NATIVE", "1")
    fast = run()
    monkeypatch.setenv("SELFHEAL_NATIVE", "0")
    return fast, run()


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([FIX_OFFLINE, DEAD_BROKER]),
       st.booleans(), st.booleans())
def test_the_job_plans_the_same_actions_from_columns_as_from_records(seed, kind, with_delta,
                                                                    cordon):
    rng = random.Random(seed)
    base, now, broker, path = history(rng)
    delta = msgspec.json.encode(make_delta(now, {broker}, base["taken_at"], "log_dir_failure"))
    cordoned = tuple((b["id"], d["path"]) for b in base["brokers"] for d in b["log_dirs"]
                     if cordon and rng.random() < 0.2)
    d = decision(kind, broker, path if kind == FIX_OFFLINE else None, with_delta, cordoned)
    with pytest.MonkeyPatch.context() as mp:
        fast, reference = both(mp, lambda: actions(base, delta, d))
    assert json.dumps(fast) == json.dumps(reference)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_base_plus_delta_on_columns_is_the_document_paths_snapshot(seed):
    rng = random.Random(seed)
    base, now, broker, path = history(rng)
    raw_delta = msgspec.json.encode(make_delta(now, {broker}, base["taken_at"], "x"))
    offline, cordoned = ((broker, path),), ((broker, path), (broker, "/data/d0"))
    doc = apply_delta(base, msgspec.json.decode(raw_delta))
    mark_offline(doc, offline)
    mark_cordoned(doc, cordoned)
    expected = snapshot_from_dict(doc)
    kept = decode(msgspec.json.encode(base))
    assert isinstance(kept.partitions, PartitionColumns) == (native.core() is not None)
    merged = snapshot_with_delta(kept, check_delta(raw_delta))
    assert merged is not None
    got = with_dirs_marked(merged, offline, cordoned)
    assert isinstance(got.partitions, type(kept.partitions))  # columns stay columns
    assert (got.brokers, got.taken_at, tuple(got.partitions)) == (
        expected.brokers, expected.taken_at, tuple(expected.partitions))


def test_a_delta_that_does_not_hold_with_the_base_is_worded_by_the_document_path(monkeypatch):
    rng = random.Random(7)
    base, now, broker, path = history(rng)
    # Its new partition's second replica sits on a broker no snapshot lists.
    now["partitions"].append(partition("stray", 0, [(broker, None, GIB), (99, "/x", GIB)]))
    delta = msgspec.json.encode(make_delta(now, {broker}, base["taken_at"], "x"))
    kept: Snapshot = decode(msgspec.json.encode(base))
    assert snapshot_with_delta(kept, check_delta(delta)) is None
    fast, reference = both(monkeypatch, lambda: actions(
        base, delta, decision(FIX_OFFLINE, broker, path, True)))
    assert fast == reference
    (page,) = fast
    assert page["type"] == "page_operator"
    assert "no plan could be made" in page["reason"] and "99" in page["reason"]


def test_a_delta_past_64_bits_takes_the_document_path_and_plans_the_same(monkeypatch):
    base, now, broker, path = history(random.Random(11))
    for p in now["partitions"]:
        for r in p["replicas"]:
            if r["broker"] == broker:
                r["size_bytes"] = 2**70  # the schema allows any non-negative int
    delta = msgspec.json.encode(make_delta(now, {broker}, base["taken_at"], "x"))
    kept: Snapshot = decode(msgspec.json.encode(base))
    if isinstance(kept.partitions, PartitionColumns):
        assert snapshot_with_delta(kept, check_delta(delta)) is None  # the core refuses
    fast, reference = both(monkeypatch, lambda: actions(
        base, delta, decision(FIX_OFFLINE, broker, path, True)))
    assert json.dumps(fast) == json.dumps(reference) and fast
