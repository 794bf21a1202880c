"""A failure's delta (schemas/snapshot_delta.py): base + deltas is the next full snapshot,
and the one decoder refuses what a delta must not be."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.registry import RecordError
from schemas.snapshot import snapshot_from_dict
from schemas.snapshot_delta import apply_delta, check_delta, make_delta


def cluster(brokers: int, dirs: int, partitions: list[list[tuple[int, int]]]) -> dict[str, Any]:
    return {
        "version": 1, "cluster_id": "c1", "taken_at": "2026-11-28T10:00:00Z",
        "brokers": [{"id": b, "rack": f"r{b % 3}", "alive": True, "log_dirs": [
            {"path": f"/d/{b}/{d}", "online": True, "total_bytes": 1000, "usable_bytes": 500}
            for d in range(dirs)]} for b in range(brokers)],
        "partitions": [{"topic": "t", "partition": i, "leader": rs[0][0],
                        "isr": [b for b, _ in rs],
                        "replicas": [{"broker": b, "log_dir": f"/d/{b}/{d}", "size_bytes": 10}
                                     for b, d in rs]} for i, rs in enumerate(partitions)],
    }


def normal(doc: dict[str, Any]) -> dict[str, Any]:
    """Order aside, the same snapshot."""
    return {**doc, "brokers": sorted(doc["brokers"], key=lambda b: b["id"]),
            "partitions": sorted(doc["partitions"], key=lambda p: (p["topic"], p["partition"]))}


BROKERS, DIRS = 4, 2
REPLICAS = st.lists(st.tuples(st.integers(0, BROKERS - 1), st.integers(0, DIRS - 1)),
                    min_size=1, max_size=3, unique_by=lambda r: r[0])

# One change on some brokers, as the cluster makes them between two snapshots: a dir
# fails or comes back, a replica moves between the dirs of its broker or grows, a
# partition on them is created or deleted, or its leader changes.
CHANGE = st.tuples(
    st.sets(st.integers(0, BROKERS - 1), min_size=1, max_size=2),
    st.sampled_from(["fail", "heal", "move", "grow", "create", "delete", "lead"]),
    st.integers(0, 1000), REPLICAS)


def change(doc: dict[str, Any], about: set[int], kind: str, pick: int,
           replicas: list[tuple[int, int]], when: str) -> dict[str, Any]:
    """``doc`` after one change confined to the brokers ``about`` and their partitions."""
    out = copy.deepcopy(doc)
    out["taken_at"] = when
    target = sorted(about)[pick % len(about)]
    broker = next(b for b in out["brokers"] if b["id"] == target)
    mine = [p for p in out["partitions"] if any(r["broker"] == target for r in p["replicas"])]
    if kind in ("fail", "heal"):
        d = broker["log_dirs"][pick % DIRS]
        d.update(online=kind == "heal", total_bytes=1000 if kind == "heal" else None,
                 usable_bytes=pick if kind == "heal" else None)
    elif kind == "create":
        new = replicas if any(b == target for b, _ in replicas) else [(target, 0), *replicas]
        new = list({b: (b, d) for b, d in new}.values())
        # a number no partition has now (a created one may have been deleted since)
        fresh = max([p["partition"] for p in out["partitions"]] + [999]) + 1 + pick
        out["partitions"].append(cluster(BROKERS, DIRS, [new])["partitions"][0]
                                 | {"partition": fresh})
    elif mine:
        p = mine[pick % len(mine)]
        mine_r = next(r for r in p["replicas"] if r["broker"] == target)
        if kind == "move":
            mine_r["log_dir"] = f"/d/{target}/{(pick + 1) % DIRS}"
        elif kind == "grow":
            mine_r["size_bytes"] += pick
        elif kind == "delete":
            out["partitions"].remove(p)
        else:
            p["leader"], p["isr"] = target, [target]
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(REPLICAS, max_size=8), st.lists(CHANGE, min_size=1, max_size=6))
def test_base_plus_deltas_is_the_next_full_snapshot(partitions, history):
    full = base = cluster(BROKERS, DIRS, partitions)
    model = base
    for step, (about, kind, pick, replicas) in enumerate(history):
        full = change(full, about, kind, pick, replicas, f"2026-11-28T10:00:{step + 1:02}Z")
        value = msgspec.json.encode(make_delta(full, about, base["taken_at"], kind))
        check_delta(value)  # the one decoder takes it
        model = apply_delta(model, msgspec.json.decode(value))
        assert normal(model) == normal(full)
    snapshot_from_dict(model)  # and every reader takes it as a snapshot


def test_the_base_is_left_as_it_was():
    base = cluster(2, 1, [[(0, 0), (1, 0)]])
    kept = copy.deepcopy(base)
    after = change(base, {0}, "fail", 0, [], "2026-11-28T10:00:09Z")
    apply_delta(base, make_delta(after, {0}, base["taken_at"], "fail"))
    assert base == kept


GOOD = make_delta(cluster(2, 2, [[(0, 0), (1, 1)]]), {0}, None, "log_dir_failure broker 0")


@pytest.mark.parametrize(("change", "where", "words"), [
    ({"brokers": []}, "brokers", "1 to 64"),
    ({"taken_at": "yesterday"}, "taken_at", "not an RFC 3339"),
    ({"base_taken_at": "2026-02-30T00:00:00Z"}, "base_taken_at", "not an RFC 3339"),
    ({"brokers": GOOD["brokers"] * 2}, "brokers[1].id", "listed twice"),
    ({"partitions": GOOD["partitions"] * 2}, "partitions[1]", "listed twice"),
    ({"partitions": cluster(2, 2, [[(1, 0)]])["partitions"]}, "partitions[0]",
     "no replica on the delta's brokers"),
    ({"partitions": cluster(2, 3, [[(0, 2)]])["partitions"]},
     "partitions[0].replicas[0].log_dir", "not a dir of broker 0"),
    ({"surprise": 1}, "$", "unknown field"),
])
def test_a_bad_delta_is_refused_with_where_and_why(change, where, words):
    with pytest.raises(RecordError) as caught:
        check_delta(msgspec.json.encode({**GOOD, **change}))
    assert caught.value.path == where and words in str(caught.value), caught.value


@pytest.mark.parametrize("value", [None, b"", b"not json", b"[1]", b"x" * (9 << 20)])
def test_what_is_no_delta_at_all_is_refused(value):
    with pytest.raises(RecordError):
        check_delta(value)


def test_the_schema_files_example_and_fields_are_the_decoders():
    from schemas import registry
    from schemas.snapshot_delta import DELTA, SnapshotDelta

    root = registry.schema(DELTA)
    assert set(root["required"]) == set(SnapshotDelta.__struct_fields__)
    for example in root["examples"]:
        registry.validate(DELTA, example)
        check_delta(msgspec.json.encode(example))
    registry.validate(DELTA, GOOD)
