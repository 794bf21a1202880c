"""The figures a run reports, read off a cluster model: disk skew, leaders per broker and
rack, and the placement audit (KIP-36 rack diversity, offline replicas, RF below intent).

Pure functions over `core.model.ClusterModel`; keys are strings so the results go into
XCom (JSON) as they are.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from core.model import ClusterModel


def disk_skew(model: ClusterModel) -> dict[str, float]:
    """Per alive broker with every dir online: its fullest dir's usage over its mean
    (1.0 is even), as `core.plan.disks` and serve's premise check measure it."""
    from core.plan.disks import broker_usage, skew

    return {str(b): round(skew(broker_usage(model, b)), 3) for b in sorted(model.brokers)
            if b in model.alive and b not in model.brokers_with_offline_dir}


def dir_bytes(model: ClusterModel) -> dict[str, dict[str, int]]:
    """Bytes of replicas per broker and log dir."""
    out: dict[str, dict[str, int]] = {}
    for (broker, path), size in sorted(model.dir_bytes.items()):
        out.setdefault(str(broker), {})[path] = size
    return out


def leaders(model: ClusterModel) -> dict[str, Any]:
    """Leaders per alive broker and per rack, and the spread (max - min over brokers)."""
    per_broker = Counter({b: 0 for b in model.alive})
    for p in model.partitions:
        if p.leader in model.alive:
            per_broker[p.leader] += 1
    per_rack: Counter[str] = Counter()
    brokers_in_rack: Counter[str] = Counter()
    for b, n in per_broker.items():
        rack = model.rack_of.get(b)
        if rack is not None:
            per_rack[rack] += n
            brokers_in_rack[rack] += 1
    counts = list(per_broker.values()) or [0]
    per_rack_per_broker = {r: per_rack[r] / brokers_in_rack[r] for r in brokers_in_rack}
    return {
        "per_broker": {str(b): per_broker[b] for b in sorted(per_broker)},
        "per_rack": {r: per_rack[r] for r in sorted(per_rack)},
        "per_rack_per_broker": {r: round(v, 2) for r, v in sorted(per_rack_per_broker.items())},
        "broker_spread": max(counts) - min(counts),
    }


def audit(model: ClusterModel, min_replication_factor: int = 1) -> dict[str, Any]:
    """What is wrong with placement: partitions whose replicas span fewer racks than
    min(RF, racks) (KIP-36), replicas on dead brokers or offline dirs, and partitions with
    fewer replicas than their topic's intent (the largest RF among its partitions, and at
    least `min_replication_factor`)."""
    racks = {r for r in model.rack_of.values() if r is not None}
    racked = bool(racks) and all(model.rack_of.get(b) is not None for b in model.brokers)
    intent: dict[str, int] = {}
    for p in model.partitions:
        intent[p.topic] = max(intent.get(p.topic, 0), len(p.replicas), min_replication_factor)

    rack_violations: list[dict[str, Any]] = []
    below_intent: list[dict[str, Any]] = []
    for p in model.partitions:
        brokers = [r.broker for r in p.replicas]
        if racked:
            spans = sorted({model.rack_of[b] or "" for b in brokers})
            want = min(len(brokers), len(racks))
            if len(spans) < want:
                rack_violations.append({
                    "topic": p.topic, "partition": p.partition, "replicas": brokers,
                    "racks": spans, "want_racks": want})
        if len(brokers) < intent[p.topic]:
            below_intent.append({"topic": p.topic, "partition": p.partition,
                                 "replicas": brokers, "intent": intent[p.topic]})
    offline: list[dict[str, Any]] = []
    for i in model.partitions_with_offline_replicas:
        p = model.partitions[i]
        offline.append({
            "topic": p.topic, "partition": p.partition,
            "replicas": [r.broker for r in p.replicas],
            "offline": [{"broker": r.broker, "log_dir": r.log_dir,
                         "why": "broker down" if r.broker not in model.alive else "dir offline"}
                        for r in p.replicas if model.is_offline(r)]})
    return {
        "racks": sorted(racks),
        "rack_aware": racked,
        "rack_diversity_violations": rack_violations,
        "offline_replicas": offline,
        "below_replication_intent": below_intent,
    }
