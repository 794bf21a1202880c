"""The snapshot collector's placement gauges: what sits where, per dir, broker and rack."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from schemas.snapshot import snapshot_from_dict
from streams.collect.placement_metrics import METRICS, PlacementMetrics, placement_samples
from tests.unit.plan_snapshots import GIB, broker, doc, partition


def _values(snapshot_doc: dict) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels)): s.value
            for s in placement_samples(snapshot_from_dict(snapshot_doc))}


def _one(values: dict, name: str, **labels: str) -> float:
    return values[(name, frozenset(labels.items()))]


def _cluster(d1_online: bool = True) -> dict:
    dirs = [{"path": "/d1", "online": d1_online,
             **({"total_bytes": 100 * GIB, "usable_bytes": 60 * GIB} if d1_online else {})},
            {"path": "/d2", "online": True, "total_bytes": 100 * GIB, "usable_bytes": 90 * GIB}]
    return doc(
        [broker(0, "r1", dirs), broker(1, "r2", ("/d1", "/d2")), broker(2, "r1", ("/d1", "/d2"))],
        [
            partition("t", 0, [(0, "/d1", 3 * GIB), (1, "/d1", 3 * GIB)]),
            partition("t", 1, [(0, "/d1", GIB), (2, "/d2", GIB)]),  # both in r1
            partition("t", 2, [(1, "/d2", GIB), (0, "/d2", GIB)]),
        ],
    )


def test_dir_bytes_replicas_and_usage_per_log_dir() -> None:
    v = _values(_cluster())
    where = {"broker": "0", "rack": "r1", "log_dir": "/d1"}
    assert _one(v, "selfheal_log_dir_replica_bytes", **where) == 4 * GIB
    assert _one(v, "selfheal_log_dir_replicas", **where) == 2
    assert _one(v, "selfheal_log_dir_online", **where) == 1
    assert _one(v, "selfheal_log_dir_capacity_bytes", **where) == 100 * GIB
    assert _one(v, "selfheal_log_dir_usage_ratio", **where) == 0.4


def test_skew_is_the_fullest_dir_over_the_broker_mean() -> None:
    v = _values(_cluster())
    # broker 0: 4 GiB on /d1, 1 GiB on /d2, same capacity: mean 2.5 GiB, fullest 4 GiB
    skew = _one(v, "selfheal_broker_log_dir_skew_ratio", broker="0", rack="r1")
    assert skew == pytest.approx(1.6)
    assert _one(v, "selfheal_broker_log_dir_spread_bytes", broker="0", rack="r1") == 3 * GIB


def test_an_offline_dir_keeps_its_replicas_counts_them_offline_and_drops_skew() -> None:
    v = _values(_cluster(d1_online=False))
    where = {"broker": "0", "rack": "r1", "log_dir": "/d1"}
    assert _one(v, "selfheal_log_dir_online", **where) == 0
    assert _one(v, "selfheal_log_dir_replicas", **where) == 2
    assert ("selfheal_log_dir_capacity_bytes", frozenset(where.items())) not in v
    assert _one(v, "selfheal_broker_offline_replicas", broker="0", rack="r1") == 2
    assert _one(v, "selfheal_partitions_with_offline_replicas") == 2
    # Kafka refuses intra-broker moves on a broker with an offline dir: no skew to fix
    assert ("selfheal_broker_log_dir_skew_ratio",
            frozenset({"broker": "0", "rack": "r1"}.items())) not in v


def test_replicas_and_leaders_per_rack_and_rack_sharing_partitions() -> None:
    v = _values(_cluster())
    assert _one(v, "selfheal_rack_replicas", rack="r1") == 4
    assert _one(v, "selfheal_rack_replicas", rack="r2") == 2
    assert _one(v, "selfheal_rack_leaders", rack="r1") == 2  # t-0 and t-1 led by broker 0
    assert _one(v, "selfheal_rack_leaders", rack="r2") == 1
    assert _one(v, "selfheal_rack_brokers", rack="r1") == 2
    assert _one(v, "selfheal_partitions_sharing_rack") == 1  # t-1: brokers 0 and 2, both r1
    assert _one(v, "selfheal_broker_leaders", broker="0", rack="r1") == 2


def test_a_partition_without_leader_counts_and_a_dead_broker_is_not_alive() -> None:
    d = _cluster()
    d["brokers"][1]["alive"] = False
    d["partitions"][2]["leader"] = -1
    v = _values(d)
    assert _one(v, "selfheal_broker_alive", broker="1", rack="r2") == 0
    assert _one(v, "selfheal_partitions_without_leader") == 1
    assert _one(v, "selfheal_rack_brokers", rack="r2") == 0


def test_registry_serves_the_latest_snapshot_only() -> None:
    registry = CollectorRegistry(auto_describe=True)
    metrics = PlacementMetrics(registry)
    metrics.update(snapshot_from_dict(_cluster()))
    text = generate_latest(registry).decode()
    for name in METRICS:
        assert f"# TYPE {name} gauge" in text
    assert 'selfheal_broker_alive{broker="2",rack="r1"} 1.0' in text
    smaller = _cluster()
    smaller["brokers"].pop(2)
    smaller["partitions"].pop(1)
    metrics.update(snapshot_from_dict(smaller))
    text = generate_latest(registry).decode()
    assert 'broker="2"' not in text  # a broker that left does not linger
