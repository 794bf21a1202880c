"""Issue 36's case: how evenly `plan offline` spreads a re-replication.

12 brokers on 4 racks, broker 11 dead, three failed dirs (two on broker 0, one on
broker 5: 9 healthy receivers), 400 partitions at RF 3 on distinct racks, sizes
heavy-tailed (lognormal). For a few seeds: the most bytes and replicas any broker
receives against the lower bound, and the recovery time at 50 MiB/s.
"""

from __future__ import annotations

import random
import time
from typing import Any

from core.model import ClusterModel
from core.plan import recovery
from core.plan.bounds import lower_bounds
from core.plan.offline import plan_offline, received, work
from schemas.snapshot import snapshot_from_dict

GIB = 1 << 30
RATE = 50 << 20
SEEDS = range(5)


def issue_case(seed: int = 0) -> dict[str, Any]:
    """The snapshot document of the issue's cluster, deterministic for a seed."""
    rng = random.Random(seed)
    racks = {b: f"r{b % 4}" for b in range(12)}
    failed = {(0, "/d0"), (0, "/d1"), (5, "/d0")}
    dead = {11}
    dirs = [f"/d{d}" for d in range(4)]
    brokers = [{"id": b, "rack": racks[b], "alive": b not in dead,
                "log_dirs": [{"path": d, "online": (b, d) not in failed,
                              "total_bytes": 4000 * GIB} for d in dirs]} for b in range(12)]
    by_rack: dict[str, list[int]] = {}
    for b, r in racks.items():
        by_rack.setdefault(r, []).append(b)
    parts = []
    for i in range(400):
        chosen = [rng.choice(by_rack[r]) for r in rng.sample(sorted(by_rack), 3)]
        size = int(GIB * rng.lognormvariate(-0.8, 1.1))
        replicas, isr = [], []
        for b in chosen:
            d = rng.choice(dirs)
            if b in dead or (b, d) in failed:
                replicas.append({"broker": b, "log_dir": None, "size_bytes": 0})
            else:
                replicas.append({"broker": b, "log_dir": d, "size_bytes": size})
                isr.append(b)
        parts.append({"topic": f"t{i // 100}", "partition": i % 100,
                      "leader": isr[0] if isr else -1, "isr": isr, "replicas": replicas})
    return {"version": 1, "cluster_id": "issue-36", "taken_at": "2026-11-28T00:00:00Z",
            "brokers": brokers, "partitions": parts}


def figures(model: ClusterModel) -> dict[str, Any]:
    """Most bytes and replicas received, their lower bounds, the estimate, plan seconds."""
    t = time.process_time()
    plan = plan_offline(model)
    seconds = time.process_time() - t
    got = received(model, plan.reassignment.partitions)
    jobs, receivers, _ = work(model)
    least, fewest = lower_bounds(jobs, receivers)
    return {"bytes": max(r.bytes for r in got), "replicas": max(r.replicas for r in got),
            "least": least, "fewest": fewest, "copied": sum(r.bytes for r in got),
            "receivers": len(got), "estimate": recovery.estimate(got, RATE),
            "seconds": seconds}


def main() -> None:
    for seed in SEEDS:
        f = figures(ClusterModel(snapshot_from_dict(issue_case(seed))))
        print(f"seed {seed}: {f['copied'] / 1e9:.1f} GB to {f['receivers']} brokers; most "
              f"received {f['bytes'] / 1e9:.1f} GB ({f['bytes'] / f['least']:.3f}x the bound "
              f"{f['least'] / 1e9:.1f}), {f['replicas']} replicas (bound {f['fewest']}); "
              f"{f['estimate']}; plan {f['seconds'] * 1000:.0f} ms", flush=True)


if __name__ == "__main__":
    main()
