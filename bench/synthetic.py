"""Synthetic cluster snapshots: any size, deterministic for a seed.

The bench uses the issue's reference cluster (`FULL`: 1,000 brokers x 12 log dirs over
10 racks, 100,000 partitions at RF 3, one failed dir per 50 brokers, skewed disks) and
its tenth (`TENTH`); tests use small ones.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

FULL: dict[str, int] = {"brokers": 1000, "partitions": 100_000}
TENTH: dict[str, int] = {"brokers": 100, "partitions": 10_000}

GIB = 1 << 30


def generate(
    *,
    brokers: int = 12,
    partitions: int = 200,
    dirs_per_broker: int = 12,
    racks: int = 10,
    replication_factor: int = 3,
    failed_dir_every: int = 50,
    dead_brokers: int = 0,
    leader_drift: float = 0.1,
    partitions_per_topic: int = 50,
    consumer_groups: int = 2,
    seed: int = 0,
) -> dict[str, Any]:
    """A snapshot document (plain JSON data, not yet validated).

    Brokers 0, N, 2N... (N = `failed_dir_every`) have their first log dir offline; the
    replicas there have no known dir, no size, and are out of the ISR. The last
    `dead_brokers` brokers are down. Each broker's dirs get a random weight, so some
    disks fill faster than others. A `leader_drift` share of partitions is led by a
    follower, as after past failovers.
    """
    rng = random.Random(seed)
    rack_names = [f"r{k}" for k in range(max(1, racks))]
    rack_of = {b: rack_names[b % len(rack_names)] for b in range(brokers)}
    by_rack: dict[str, list[int]] = {r: [] for r in rack_names}
    for b, r in rack_of.items():
        by_rack[r].append(b)
    dir_paths = [f"/data/d{d}" for d in range(dirs_per_broker)]
    weights = {b: [rng.uniform(0.3, 3.0) for _ in dir_paths] for b in range(brokers)}
    failed = (
        {b: dir_paths[0] for b in range(0, brokers, failed_dir_every)} if failed_dir_every else {}
    )
    dead = set(range(brokers - dead_brokers, brokers))
    used: dict[tuple[int, str], int] = {}

    parts: list[dict[str, Any]] = []
    rf = min(replication_factor, brokers)
    populated = [r for r in rack_names if by_rack[r]]
    for i in range(partitions):
        size = int(rng.expovariate(1.0 / GIB))
        if rf <= len(populated):
            chosen = [rng.choice(by_rack[r]) for r in rng.sample(populated, rf)]
        else:
            chosen = rng.sample(range(brokers), rf)
        replicas: list[dict[str, Any]] = []
        isr: list[int] = []
        for b in chosen:
            path = rng.choices(dir_paths, weights[b])[0]
            if b in dead or failed.get(b) == path:
                replicas.append({"broker": b, "log_dir": None, "size_bytes": 0})
                continue
            replicas.append({"broker": b, "log_dir": path, "size_bytes": size})
            used[(b, path)] = used.get((b, path), 0) + size
            isr.append(b)
        leader = -1
        if isr:
            leader = isr[0] if rng.random() >= leader_drift else rng.choice(isr)
        parts.append(
            {
                "topic": f"topic-{i // partitions_per_topic}",
                "partition": i % partitions_per_topic,
                "leader": leader,
                "isr": isr,
                "replicas": replicas,
            }
        )

    mean_used = sum(used.values()) / max(1, len(used))
    capacity = max(GIB, int(mean_used * 3))
    broker_docs: list[dict[str, Any]] = []
    for b in range(brokers):
        dirs: list[dict[str, Any]] = []
        for path in dir_paths:
            if failed.get(b) == path:
                dirs.append(
                    {"path": path, "online": False, "total_bytes": None, "usable_bytes": None}
                )
            else:
                free = max(0, capacity - used.get((b, path), 0))
                dirs.append(
                    {"path": path, "online": True, "total_bytes": capacity, "usable_bytes": free}
                )
        broker_docs.append({"id": b, "rack": rack_of[b], "alive": b not in dead, "log_dirs": dirs})

    topics = sorted({p["topic"] for p in parts})
    groups: list[dict[str, Any]] = []
    for g in range(consumer_groups):
        subscribed = topics[g : g + 3]
        members = [
            {
                "member_id": f"consumer-{g}-{m}",
                "client_id": f"app-{g}",
                "rack": rack_names[m % len(rack_names)],
                "topics": subscribed,
            }
            for m in range(6)
        ]
        groups.append({"group": f"group-{g}", "members": members})

    return {
        "version": 1,
        "cluster_id": f"synthetic-{brokers}x{dirs_per_broker}-{partitions}",
        "taken_at": "2026-11-22T00:00:00Z",
        "brokers": broker_docs,
        "partitions": parts,
        "consumer_groups": groups,
    }


def write(path: str | Path, **kwargs: Any) -> Path:
    """Generate a snapshot and write it as compact JSON."""
    target = Path(path)
    with target.open("w") as out:
        json.dump(generate(**kwargs), out, separators=(",", ":"))
    return target
