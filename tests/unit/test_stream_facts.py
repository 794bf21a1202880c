"""What detection keeps of a snapshot (streams/facts.py)."""

from __future__ import annotations

import json

from hypothesis import given, settings

from schemas.snapshot import snapshot_from_dict
from schemas.snapshot_columns import read_columns
from streams.detect_types import SnapshotFacts
from streams.facts import FactLimits, leader_imbalance, snapshot_facts
from tests.unit.plan_snapshots import GIB, broker, clusters, doc, model, partition

LIMITS = FactLimits(disk_skew_threshold=1.10, disk_skew_min_bytes=GIB,
                    leader_imbalance_threshold=1.10)
TWO_DIRS = ("/d1", "/d2")


def skew_doc(sizes_d1: list[int], sizes_d2: list[int], dirs=TWO_DIRS, alive=True):
    parts = [partition("a", i, [(0, "/d1", s)]) for i, s in enumerate(sizes_d1)]
    parts += [partition("b", i, [(0, "/d2", s)]) for i, s in enumerate(sizes_d2)]
    return doc([broker(0, "r1", dirs, alive=alive), broker(1, "r2", TWO_DIRS)], parts)


def facts(document) -> SnapshotFacts:
    return snapshot_facts(snapshot_from_dict(document), LIMITS)


def test_dirs_and_liveness_are_kept_per_broker():
    offline = {"path": "/d2", "online": False}
    f = facts(doc([broker(0, "r1", ("/d1", offline)), broker(1, "r2", alive=False)], []))
    assert f.dirs == {0: {"/d1": True, "/d2": False}, 1: {"/d1": True}}
    assert f.alive == {0: True, 1: False}
    assert SnapshotFacts.from_json(f.to_json()) == f


def test_a_dir_far_above_its_broker_mean_is_skew():
    f = facts(skew_doc([4 * GIB, 4 * GIB], [GIB]))
    assert list(f.skewed) == [0] and f.skewed[0] > 1.5


def test_skew_of_a_few_bytes_is_noise():
    assert facts(skew_doc([4000, 4000], [1000])).skewed == {}


def test_within_the_threshold_is_not_skew():
    assert facts(skew_doc([10 * GIB], [9 * GIB])).skewed == {}


def test_brokers_the_disk_planner_cannot_touch_are_not_skewed():
    offline = ("/d1", "/d2", {"path": "/d3", "online": False})
    assert facts(skew_doc([4 * GIB, 4 * GIB], [GIB], dirs=offline)).skewed == {}
    assert facts(skew_doc([4 * GIB, 4 * GIB], [GIB], alive=False)).skewed == {}


def leaders_doc(leads: list[int], racks=("r1", "r2", "r3")):
    bs = [broker(b, racks[b]) for b in range(len(racks))]
    ps = []
    for i, leader in enumerate(leads):
        replicas = [leader, *(b for b in range(len(racks)) if b != leader)][:2]
        ps.append(partition("t", i, replicas, leader=leader))
    return doc(bs, ps)


def test_a_broker_leading_far_above_its_share_is_imbalance():
    why = leader_imbalance(model(leaders_doc([0] * 6 + [1, 1, 2, 2])), 1.10)
    assert why is not None and why.startswith("broker 0 leads 6 partitions")


def test_whole_number_spread_is_balanced():
    assert leader_imbalance(model(leaders_doc([0, 0, 0, 0, 1, 1, 1, 2, 2, 2])), 1.10) is None


def test_a_rack_above_its_share_is_imbalance_even_when_each_broker_is_within_one():
    racks = ("r1", "r1", "r2", "r2")
    # 3, 3, 2, 2: every broker within ceil(2.5); rack r1 leads 6 of a fair 5.0.
    why = leader_imbalance(model(leaders_doc([0, 0, 0, 1, 1, 1, 2, 2, 3, 3], racks)), 1.10)
    assert why is not None and why.startswith("rack r1 leads 6 partitions")
    assert leader_imbalance(model(leaders_doc([0, 0, 0, 1, 1, 2, 2, 2, 3, 3], racks)),
                            1.10) is None


@settings(max_examples=150, deadline=None)
@given(clusters(max_brokers=8, max_partitions=40, max_size=3 * GIB))
def test_the_facts_of_the_core_s_columns_are_those_of_the_records(document):
    # the job's decode step takes the columns where the core reads the document
    columns = read_columns(json.dumps(document).encode())
    assert columns is not None
    assert (snapshot_facts(columns, LIMITS).to_json()
            == snapshot_facts(snapshot_from_dict(document), LIMITS).to_json())
