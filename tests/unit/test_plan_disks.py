"""`plan disks`: intra-broker moves that bring every dir under threshold x the mean."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.model import ClusterModel
from core.plan.disks import broker_usage, explain, mean_ratio, over_limit, plan_disks
from core.plan.errors import PlanError
from core.plan.formats import DiskPlan
from schemas.plans import ANY_DIR
from tests.unit.plan_snapshots import GIB, broker, clusters, doc, model, partition

SELFHEAL = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "selfheal")


def usage_after(m: ClusterModel, plan: DiskPlan) -> dict[int, dict[str, int]]:
    used = {b: {d.path: d.used for d in broker_usage(m, b)} for b in m.brokers if b in m.alive}
    for mv in plan.moves:
        used[mv.broker][mv.source] -= mv.size_bytes
        used[mv.broker][mv.target] += mv.size_bytes
    return used


def over(m: ClusterModel, b: int, used: dict[str, int], threshold: float) -> bool:
    dirs = broker_usage(m, b)
    for d in dirs:
        d.used = used[d.path]
    mean = mean_ratio(dirs) if dirs else 0
    return any(over_limit(d.used, threshold * mean * d.capacity) for d in dirs)


def two_dirs(sizes_d1: list[int], sizes_d2: list[int], total: int | None = 100 * GIB) -> dict:
    parts = [partition("t", i, [(0, "/d1", s)]) for i, s in enumerate(sizes_d1)]
    parts += [partition("u", i, [(0, "/d2", s)]) for i, s in enumerate(sizes_d2)]
    return doc([broker(0, "a", ["/d1", "/d2"], total=total)], parts)


def test_the_smallest_replica_that_clears_the_excess_moves():
    # /d1 holds 60 GiB, /d2 0: mean 30, limit 33; excess 27. 30 clears it; 10 and 20 are
    # smaller but would need two moves (30 GiB); 40 would overshoot.
    m = model(two_dirs([10 * GIB, 20 * GIB, 30 * GIB], []))
    plan = plan_disks(m, 1.10)
    assert [(mv.topic, mv.partition, mv.source, mv.target, mv.size_bytes) for mv in plan.moves] == [
        ("t", 2, "/d1", "/d2", 30 * GIB)
    ]
    assert plan.to_json()["partitions"] == [
        {"topic": "t", "partition": 2, "replicas": [0], "log_dirs": ["/d2"]}
    ]


def test_without_a_single_fit_the_largest_replicas_that_do_not_overshoot_move():
    # Six 10 GiB replicas on /d1 of three 100 GiB dirs: limit 22 GiB a dir, so four move,
    # two to each other dir: 40 GiB, the least that clears an excess of 38.
    parts = [partition("t", i, [(0, "/d1", 10 * GIB)]) for i in range(6)]
    m = model(doc([broker(0, "a", ["/d1", "/d2", "/d3"])], parts))
    plan = plan_disks(m, 1.10)
    assert [mv.size_bytes for mv in plan.moves] == [10 * GIB] * 4
    assert sorted(mv.target for mv in plan.moves) == ["/d2", "/d2", "/d3", "/d3"]
    assert not over(m, 0, usage_after(m, plan)[0], 1.10)


def test_bytes_alone_when_capacity_is_unknown():
    m = model(two_dirs([10 * GIB, 20 * GIB, 30 * GIB], [], total=None))
    plan = plan_disks(m, 1.10)
    assert [mv.size_bytes for mv in plan.moves] == [30 * GIB]


def test_balanced_brokers_need_nothing():
    m = model(two_dirs([10 * GIB], [10 * GIB]))
    assert plan_disks(m).to_json() == {"version": 1, "partitions": [], "skipped": []}


def test_brokers_with_an_offline_dir_or_down_are_skipped_with_the_reason():
    brokers = [
        broker(0, "a", ["/d1", {"path": "/d2", "online": False}]),
        broker(1, "a", ["/d1", "/d2"], alive=False),
    ]
    parts = [partition("t", i, [(0, "/d1", GIB), (1, "/d1", GIB)]) for i in range(5)]
    plan = plan_disks(model(doc(brokers, parts)))
    assert plan.moves == ()
    assert [(s.broker, s.reason) for s in plan.skipped] == [
        (0, ("log dir /d2 on broker 0 is offline; intra-broker moves are refused until it is "
             "fixed or removed from log.dirs")),
        (1, "broker is down; nothing can move on it"),
    ]  # fmt: skip


def test_an_unreachable_threshold_is_reported_and_what_helps_is_planned():
    # One 60 GiB replica cannot go anywhere without overshooting the other dir's limit.
    m = model(two_dirs([60 * GIB], [1 * GIB]))
    plan = plan_disks(m, 1.10)
    assert plan.moves == ()
    (s,) = plan.skipped
    assert s.broker == 0
    assert "threshold not reachable" in s.reason


def test_threshold_below_one_is_a_plan_error():
    with pytest.raises(PlanError, match="1.0 or more"):
        plan_disks(model(two_dirs([GIB], [])), 0.9)


def fine_grained(rng: random.Random, brokers: int) -> dict:
    """Many small replicas on skewed dirs: the threshold is always reachable."""
    bs = [
        broker(b, "a", [f"/d{k}" for k in range(rng.randint(2, 5))], total=1000 * GIB)
        for b in range(brokers)
    ]
    parts = []
    for i in range(rng.randint(100, 300)):
        b = rng.randrange(brokers)
        dirs = [d["path"] for d in bs[b]["log_dirs"]]
        path = rng.choices(dirs, weights=[1 + 10 * (k == 0) for k in range(len(dirs))])[0]
        parts.append(partition("t", i, [(b, path, rng.randint(1, 3) * GIB)]))
    return doc(bs, parts)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), threshold=st.sampled_from([1.0, 1.05, 1.10, 1.5]))
def test_the_threshold_is_met_when_replicas_are_small_enough(seed, threshold):
    rng = random.Random(seed)
    m = model(fine_grained(rng, rng.randint(1, 4)))
    plan = plan_disks(m, threshold)
    used = usage_after(m, plan)
    for b in m.brokers:
        met = not over(m, b, used[b], threshold)
        skipped = any(s.broker == b for s in plan.skipped)
        assert met or skipped
        # While a dir is over its limit another is under the mean, with at least
        # (threshold - 1) x mean of room: replicas no bigger than that always fit.
        dirs = broker_usage(m, b)
        mean = mean_ratio(dirs)
        biggest = max(
            (r.size_bytes for p in m.partitions for r in p.replicas if r.broker == b), default=0
        )
        if biggest <= (threshold - 1) * mean * min(d.capacity for d in dirs):
            assert met


@settings(max_examples=120, deadline=None)
@given(document=clusters(), threshold=st.sampled_from([1.0, 1.10, 1.25]))
def test_moves_stay_on_their_broker_onto_online_dirs_and_meet_the_threshold(document, threshold):
    m = model(document)
    plan = plan_disks(m, threshold)
    index = m.partition_index()
    skipped = {s.broker for s in plan.skipped}
    # Never a broker with an offline dir or a dead one; every one of those is listed.
    assert skipped >= m.brokers_with_offline_dir | (set(m.brokers) - m.alive)
    for mv in plan.moves:
        assert mv.broker in m.alive and mv.broker not in m.brokers_with_offline_dir
        assert m.dirs[mv.broker][mv.target].online and mv.source != mv.target
    for a in plan.reassignment.partitions:
        p = m.partitions[index[(a.topic, a.partition)]]
        assert a.replicas == tuple(r.broker for r in p.replicas)  # never across brokers
        assert any(d != ANY_DIR for d in a.log_dirs or ())
    used = usage_after(m, plan)
    for b in m.alive - m.brokers_with_offline_dir:
        assert not over(m, b, used[b], threshold) or b in skipped
    # Near-minimal bytes: per source dir, less than its excess plus one replica.
    for b in {mv.broker for mv in plan.moves}:
        dirs = broker_usage(m, b)
        mean = mean_ratio(dirs)
        for d in dirs:
            out = [mv.size_bytes for mv in plan.moves if mv.broker == b and mv.source == d.path]
            if out:
                excess = d.used - threshold * mean * d.capacity
                assert sum(out) < excess + max(out) + 1


def test_explain_and_cli(tmp_path):
    document = two_dirs([10 * GIB, 20 * GIB, 30 * GIB], [])
    m = model(document)
    assert "broker 0: fullest dir 2.00x -> 1.00x the mean, 1 moves" in explain(m, plan_disks(m))
    path = tmp_path / "s.json"
    path.write_text(json.dumps(document))
    done = subprocess.run(
        [SELFHEAL, "plan", "disks", "--snapshot", str(path), "--threshold", "1.2", "--explain"],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["partitions"][0]["log_dirs"] == ["/d2"]
    assert out["skipped"] == []
    assert "t-2 on 0: /d1 -> /d2 (30.0 GiB)" in done.stderr
    bad = subprocess.run(
        [SELFHEAL, "plan", "disks", "--snapshot", str(path), "--threshold", "0.5"],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "--threshold must be 1.0 or more" in bad.stderr


def test_the_cli_default_threshold_is_the_planners():
    from core.plan import disks
    from remediation.plan import cli

    assert cli.DEFAULT_THRESHOLD == disks.DEFAULT_THRESHOLD
