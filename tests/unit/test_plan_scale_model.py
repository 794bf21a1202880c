"""The model's two ways to its sums agree: from the checking walker's per-dir index, and
(after the typed decoder, which leaves no index) from its own passes. Plans made from
either are the same."""

from __future__ import annotations

import json

import pytest

from bench import synthetic
from core.model import ClusterModel
from core.plan import disks, leaders, offline
from schemas.snapshot import parse_snapshot, snapshot_from_dict


def both(doc: dict) -> tuple[ClusterModel, ClusterModel]:
    walked = ClusterModel(snapshot_from_dict(doc))
    decoded = ClusterModel(parse_snapshot(json.dumps(doc)))
    assert walked.snapshot.replicas_by_dir and not decoded.snapshot.replicas_by_dir
    return walked, decoded


def renumbered(doc: dict, shift: int) -> dict:
    """The same cluster with every broker id moved up by `shift`."""
    for b in doc["brokers"]:
        b["id"] += shift
    for p in doc["partitions"]:
        if p["leader"] >= 0:
            p["leader"] += shift
        p["isr"] = [b + shift for b in p["isr"]]
        for r in p["replicas"]:
            r["broker"] += shift
    return doc


CASES = [
    {"brokers": 30, "partitions": 600, "failed_dir_every": 10, "dead_brokers": 1, "racks": 5},
    {"brokers": 12, "partitions": 400, "failed_dir_every": 3, "dead_brokers": 2, "seed": 4},
    {"brokers": 7, "partitions": 300, "dirs_per_broker": 3, "failed_dir_every": 0, "seed": 9},
    {"brokers": 40, "partitions": 900, "replication_factor": 2, "racks": 1, "seed": 2},
]


@pytest.mark.parametrize("shift", [0, 1 << 20])  # small ids index lists, large ones dicts
@pytest.mark.parametrize("case", CASES)
def test_sums_and_plans_agree_with_and_without_the_dir_index(case, shift):
    walked, decoded = both(renumbered(synthetic.generate(**case), shift))
    assert decoded.replica_counts == walked.replica_counts
    assert list(decoded.replica_counts) == list(walked.replica_counts)
    assert decoded.broker_bytes == walked.broker_bytes
    assert decoded.partitions_with_offline_replicas == walked.partitions_with_offline_replicas
    assert decoded.dir_bytes == walked.dir_bytes
    for planner in (offline.plan_offline, disks.plan_disks, leaders.plan_leaders):
        fresh_walked, fresh_decoded = both(renumbered(synthetic.generate(**case), shift))
        assert planner(fresh_decoded).to_json() == planner(fresh_walked).to_json()
    fresh_walked, fresh_decoded = both(renumbered(synthetic.generate(**case), shift))
    plan = offline.plan_offline(fresh_decoded)
    assert offline.explain(fresh_decoded, plan) == offline.explain(fresh_walked, plan)
    plan = disks.plan_disks(fresh_decoded, 1.02)
    assert disks.explain(fresh_decoded, plan, 1.02) == disks.explain(fresh_walked, plan, 1.02)
    assert plan.moves == disks.plan_disks(fresh_walked, 1.02).moves


def test_the_sums_of_a_snapshot_built_by_hand():
    walked, _ = both(synthetic.generate(brokers=6, partitions=50, failed_dir_every=2))
    by_hand = ClusterModel(walked.snapshot.__class__(
        walked.snapshot.cluster_id, walked.snapshot.taken_at, walked.snapshot.brokers,
        walked.snapshot.partitions))
    assert by_hand.broker_bytes == walked.broker_bytes
    assert by_hand.partitions_with_offline_replicas == walked.partitions_with_offline_replicas
