"""Small snapshots for the planner tests: hand-built ones and random ones."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import strategies as st

from core.model import ClusterModel
from schemas.snapshot import snapshot_from_dict

GIB = 1 << 30


def broker(
    id: int,
    rack: str | None = None,
    dirs: Any = ("/d1",),
    alive: bool = True,
    total: int | None = 100 * GIB,
) -> dict[str, Any]:
    """A broker; `dirs` are paths (online, `total` bytes each) or full log-dir dicts."""
    log_dirs = [
        d if isinstance(d, dict) else {"path": d, "online": True, "total_bytes": total}
        for d in dirs
    ]
    return {"id": id, "rack": rack, "alive": alive, "log_dirs": log_dirs}


def partition(
    topic: str,
    number: int,
    replicas: list[tuple[int, str | None, int]] | list[int],
    leader: int | None = None,
    isr: list[int] | None = None,
) -> dict[str, Any]:
    """A partition; replicas as (broker, dir, bytes) or bare broker ids (on /d1, 1 GiB)."""
    reps = [
        {"broker": r, "log_dir": "/d1", "size_bytes": GIB}
        if isinstance(r, int)
        else {"broker": r[0], "log_dir": r[1], "size_bytes": r[2]}
        for r in replicas
    ]
    brokers = [r["broker"] for r in reps]
    return {
        "topic": topic,
        "partition": number,
        "leader": brokers[0] if leader is None else leader,
        "isr": brokers if isr is None else isr,
        "replicas": reps,
    }


def doc(
    brokers: list[dict[str, Any]], partitions: list[dict[str, Any]], groups: Any = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version": 1,
        "cluster_id": "test",
        "taken_at": "2026-11-22T00:00:00Z",
        "brokers": brokers,
        "partitions": partitions,
    }
    if groups is not None:
        out["consumer_groups"] = groups
    return out


def model(document: dict[str, Any]) -> ClusterModel:
    return ClusterModel(snapshot_from_dict(document))


def random_cluster(
    rng: random.Random,
    *,
    brokers: int,
    racks: int,
    partitions: int,
    max_rf: int = 3,
    dirs: int = 3,
    p_dead: float = 0.1,
    p_dir_offline: float = 0.1,
    p_no_rack: float = 0.0,
    p_no_total: float = 0.1,
    p_out_of_sync: float = 0.1,
    max_size: int = 10 * GIB,
) -> dict[str, Any]:
    """A random, valid snapshot document: dead brokers, failed dirs (their replicas
    with unknown dir), unknown capacities, replicas out of the ISR, drifted leaders."""
    rack_names = [f"r{k}" for k in range(racks)]
    bs: list[dict[str, Any]] = []
    for b in range(brokers):
        log_dirs = []
        for d in range(rng.randint(1, dirs)):
            online = rng.random() >= p_dir_offline
            total = None if rng.random() < p_no_total else rng.randint(20, 200) * GIB
            log_dirs.append({"path": f"/data/d{d}", "online": online, "total_bytes": total})
        rack = None if rng.random() < p_no_rack else rng.choice(rack_names)
        bs.append(broker(b, rack, log_dirs, alive=rng.random() >= p_dead))
    ps: list[dict[str, Any]] = []
    for i in range(partitions):
        rf = rng.randint(1, min(max_rf, brokers))
        chosen = rng.sample(range(brokers), rf)
        size = rng.randint(0, max_size)
        reps: list[tuple[int, str | None, int]] = []
        isr: list[int] = []
        for b in chosen:
            d = rng.choice(bs[b]["log_dirs"])
            usable = bs[b]["alive"] and d["online"]
            path = d["path"] if d["online"] or rng.random() < 0.5 else None
            reps.append((b, path, size if usable else 0))
            if usable and rng.random() >= p_out_of_sync:
                isr.append(b)
        leader = rng.choice(isr) if isr else -1
        ps.append(partition(f"t{i % 5}", i // 5, reps, leader=leader, isr=isr))
    return doc(bs, ps)


@st.composite
def clusters(
    draw: st.DrawFn, max_brokers: int = 8, max_partitions: int = 30, **kw: Any
) -> dict[str, Any]:
    """Hypothesis strategy: the sizes are drawn, the details come from a drawn seed."""
    seed = draw(st.integers(0, 2**32 - 1))
    return random_cluster(
        random.Random(seed),
        brokers=draw(st.integers(1, max_brokers)),
        racks=draw(st.integers(1, 4)),
        partitions=draw(st.integers(0, max_partitions)),
        **kw,
    )
