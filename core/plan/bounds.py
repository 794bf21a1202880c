"""The least the busiest receiver of a re-replication can get: bytes, and replicas.

The offline planner stops improving once it is this close (core/plan/spread.py), and
`plan offline --explain` shows it next to the plan's own figure.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.plan.spread import Job, Receiver


def lower_bounds(jobs: Iterable[Job], receivers: list[Receiver]) -> tuple[int, int]:
    """No plan that keeps the rules gives its busiest receiver fewer bytes, or fewer
    replicas, than these. Each is the largest of: one new replica; everything over every
    receiver; what must go to healthy brokers over the healthy ones; per rack, what the
    rack rule forces into it over the brokers there that can take it; and per rack group
    (a job's open racks, or two jobs' together), what can only go there over its brokers.
    """
    healthy = frozenset(r.broker for r in receivers if not r.degraded)
    by_rack: dict[tuple[str, bool], frozenset[int]] = {}
    for r in receivers:
        if r.rack is not None:
            key = (r.rack, r.degraded)
            by_rack[key] = by_rack.get(key, frozenset()) | {r.broker}
    # Per measure (bytes, replicas): biggest, total, on healthy, forced per (rack, degraded),
    # and per (open racks, healthy only, new replicas on open racks) the jobs' weight.
    sums: list[list[Any]] = [[0, 0, 0, dict.fromkeys(by_rack, 0), {}] for _ in range(2)]
    for job in jobs:
        if job.need <= 0:
            continue
        exclude = job.exclude
        open_racks: set[str] = set()
        healthy_racks: set[str] = set()
        for (rack, degraded), brokers in by_rack.items():
            if rack not in job.kept_racks and not brokers <= exclude:
                open_racks.add(rack)
                if not degraded:
                    healthy_racks.add(rack)
        hosts = len(healthy) - len(healthy & exclude)
        only_healthy = hosts >= job.need and min(job.need, len(healthy_racks)) == min(
            job.need, len(open_racks))  # a plan with no degraded broker keeps the racks
        group = (frozenset(open_racks), only_healthy, min(job.need, len(open_racks)))
        for w, acc in zip((job.size, 1), sums, strict=True):
            acc[0] = max(acc[0], w)
            acc[1] += w * job.need
            if only_healthy:
                acc[2] += w * job.need
            if len(open_racks) <= job.need:  # every open rack gets one
                forced = acc[3]
                for rack in open_racks:
                    forced[(rack, rack not in healthy_racks)] += w
            acc[4][group] = acc[4].get(group, 0) + w
    out = []
    for biggest, total, on_healthy, forced, groups in sums:
        bound = max(biggest, _ceil(total, len(receivers)), _ceil(on_healthy, len(healthy)))
        for key, w in forced.items():
            bound = max(bound, _ceil(w, len(by_rack[key])))
        out.append(max(bound, _group_bound(groups, by_rack)))
    return out[0], out[1]


def _group_bound(groups: dict[tuple[frozenset[str], bool, int], int],
                 by_rack: dict[tuple[str, bool], frozenset[int]]) -> int:
    """Per rack group G (each job's open racks, and each union of two): what must go to
    G over its brokers (the healthy ones for what needs no degraded broker, all for all).
    A job with open racks O puts min(need, |O|) new replicas on distinct racks of O, so
    at least that less |O - G| of them in G."""
    sets = sorted({g for g, _, _ in groups}, key=lambda g: sorted(g))
    unions = set(sets) | {a | b for i, a in enumerate(sets) for b in sets[i + 1:]}
    bound = 0
    for g in unions:
        on_healthy = anywhere = 0
        for (o, healthy, spread), w in groups.items():
            inside = spread - len(o - g)
            if inside > 0:
                anywhere += w * inside
                if healthy:
                    on_healthy += w * inside
        n_healthy = sum(len(by_rack.get((rack, False), ())) for rack in g)
        n_all = n_healthy + sum(len(by_rack.get((rack, True), ())) for rack in g)
        bound = max(bound, _ceil(on_healthy, n_healthy), _ceil(anywhere, n_all))
    return bound


def _ceil(a: int, b: int) -> int:
    return -(-a // b) if b else 0
