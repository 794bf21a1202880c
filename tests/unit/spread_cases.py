"""Random clusters for the offline planner's spread, and the exact optimum by brute force.

A plan keeps the rules when each partition's new brokers are outside the partition, span
as many racks as possible with the survivors, and among such sets hold as few brokers
with an offline dir as possible. `optimum` tries every such plan (branch and bound).
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from core.plan.spread import Job, Receiver, order
from tests.unit.plan_snapshots import GIB, broker, doc, partition


def skewed_cluster(
    rng: random.Random, *, brokers: int, racks: int, partitions: int, rf: int,
    dead: int, failed_dirs: int, dirs: int = 3,
) -> dict[str, Any]:
    """`dead` brokers down and `failed_dirs` dirs offline on other brokers; replicas on
    distinct racks where RF allows (as Kafka places them); sizes heavy-tailed."""
    rack_of = [f"r{b % racks}" for b in range(brokers)]
    rng.shuffle(rack_of)
    down = set(rng.sample(range(brokers), dead))
    dir_keys = [(b, d) for b in range(brokers) if b not in down for d in range(dirs)]
    failed = set(rng.sample(dir_keys, min(failed_dirs, len(dir_keys))))
    bs = []
    for b in range(brokers):
        log_dirs = [{"path": f"/d{d}", "online": (b, d) not in failed,
                     "total_bytes": 10_000 * GIB} for d in range(dirs)]
        bs.append(broker(b, rack_of[b], log_dirs, alive=b not in down))
    by_rack: dict[str, list[int]] = {}
    for b, r in enumerate(rack_of):
        by_rack.setdefault(r, []).append(b)
    ps = []
    for i in range(partitions):
        r = min(rf, brokers)
        if r <= len(by_rack):
            chosen = [rng.choice(by_rack[k]) for k in rng.sample(sorted(by_rack), r)]
        else:
            chosen = rng.sample(range(brokers), r)
        size = int(GIB * rng.lognormvariate(-1.0, 1.2))
        reps: list[tuple[int, str | None, int]] = []
        isr = []
        for b in chosen:
            d = rng.randrange(dirs)
            if b in down or (b, d) in failed:
                reps.append((b, None, 0))
            else:
                reps.append((b, f"/d{d}", size))
                isr.append(b)
        ps.append(partition(f"t{i % 3}", i // 3, reps, leader=isr[0] if isr else -1, isr=isr))
    return doc(bs, ps)


def _shape(job: Job, brokers: tuple[int, ...], rack: dict[int, str | None],
           degraded: dict[int, bool]) -> tuple[int, int]:
    racks = set(job.kept_racks) | {rack[b] for b in brokers if rack[b] is not None}
    return len(racks), -sum(degraded[b] for b in brokers)


def feasible(job: Job, receivers: list[Receiver]) -> list[tuple[int, ...]]:
    """Every set of new brokers for `job` that keeps the rules."""
    rack = {r.broker: r.rack for r in receivers}
    degraded = {r.broker: r.degraded for r in receivers}
    free = [r.broker for r in receivers if r.broker not in job.exclude]
    sets = list(itertools.combinations(free, job.need))
    best = max(_shape(job, s, rack, degraded) for s in sets)
    return [s for s in sets if _shape(job, s, rack, degraded) == best]


def optimum(jobs: list[Job], receivers: list[Receiver], *, count_only: bool = False
            ) -> tuple[int, int]:
    """The least (most bytes, then most replicas) any receiver gets over every plan that
    keeps the rules; with `count_only`, the least most replicas alone (bytes 0)."""
    ordered = order(jobs)
    options = [feasible(j, receivers) for j in ordered]
    got = {r.broker: 0 for r in receivers}
    count = dict(got)
    best = [float("inf"), float("inf")]

    def walk(k: int, top: int, most: int) -> None:
        if (top, most) >= tuple(best):
            return
        if k == len(ordered):
            best[:] = [top, most]
            return
        size = 0 if count_only else ordered[k].size
        ranked = sorted(options[k], key=lambda s: (max(got[b] + size for b in s),
                                                   max(count[b] for b in s)))
        for chosen in ranked:
            for b in chosen:
                got[b] += size
                count[b] += 1
            walk(k + 1, max(top, *(got[b] for b in chosen)),
                 max(most, *(count[b] for b in chosen)))
            for b in chosen:
                got[b] -= size
                count[b] -= 1

    walk(0, 0, 0)
    return int(best[0]), int(best[1])
