"""The least the busiest receiver of a re-replication can get: bytes, and replicas; and
what the rack rule sends to each rack, which the greedy weighs (`rack_shares`).

The offline planner stops improving once it is this close (core/plan/spread.py), and
`plan offline --explain` shows it next to the plan's own figure. `fewest_replicas` is
the replica bound among the plans no worse by bytes than a given peak.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator
from itertools import accumulate
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from core.plan.spread import Job, Receiver

W = TypeVar("W")


def lower_bounds(jobs: Iterable[Job], receivers: list[Receiver]) -> tuple[int, int]:
    """No plan that keeps the rules gives its busiest receiver fewer bytes, or fewer
    replicas, than these. Each is the largest of: one new replica; everything over every
    receiver; what must go to healthy brokers over the healthy ones; per rack, what the
    rack rule forces into it over the brokers there that can take it; and per rack group
    (a job's open racks, or two jobs' together), what can only go there over its brokers.
    """
    healthy, by_rack = _hosts(receivers)
    # Per measure (bytes, replicas): biggest, total, on healthy, forced per (rack, degraded),
    # and per (open racks, healthy only, new replicas on open racks) the jobs' weight.
    sums: list[list[Any]] = [[0, 0, 0, dict.fromkeys(by_rack, 0), {}] for _ in range(2)]
    for job in jobs:
        if job.need <= 0:
            continue
        group, healthy_racks = _classify(job, by_rack, healthy)
        open_racks, only_healthy, _ = group
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


_Group = tuple[frozenset[str], bool, int]  # (open racks, healthy only, new replicas on them)
_ByRack = dict[tuple[str, bool], frozenset[int]]  # (rack, degraded) -> its receivers


def _hosts(receivers: list[Receiver]) -> tuple[frozenset[int], _ByRack]:
    """The healthy receivers, and the receivers per (rack, degraded)."""
    healthy = frozenset(r.broker for r in receivers if not r.degraded)
    by_rack: _ByRack = {}
    for r in receivers:
        if r.rack is not None:
            key = (r.rack, r.degraded)
            by_rack[key] = by_rack.get(key, frozenset()) | {r.broker}
    return healthy, by_rack


def _classify(job: Job, by_rack: _ByRack,
              healthy: frozenset[int]) -> tuple[_Group, set[str]]:
    """A job's group (open racks: racks the survivors do not span with a receiver outside
    `exclude`), and its open racks with a healthy receiver."""
    open_racks: set[str] = set()
    healthy_racks: set[str] = set()
    for (rack, degraded), brokers in by_rack.items():
        if rack not in job.kept_racks and not brokers <= job.exclude:
            open_racks.add(rack)
            if not degraded:
                healthy_racks.add(rack)
    hosts = len(healthy) - len(healthy & job.exclude)
    only_healthy = hosts >= job.need and min(job.need, len(healthy_racks)) == min(
        job.need, len(open_racks))  # a plan with no degraded broker keeps the racks
    return (frozenset(open_racks), only_healthy, min(job.need, len(open_racks))), healthy_racks


def fewest_replicas(jobs: Iterable[Job], receivers: list[Receiver], cap: int) -> int:
    """No plan that keeps the rules and gives no receiver more than `cap` bytes gives its
    busiest receiver fewer replicas than this: `lower_bounds`' replica bound with each
    broker's room in bytes counted (`_fewest`). With `cap` a plan's most bytes received,
    the reference for the second objective: a replica as large as the peak fills the
    broker that takes it, and the rest of its rack group's replicas go to fewer brokers
    than the bound by count alone assumes."""
    healthy, by_rack = _hosts(receivers)
    everything: list[int] = []
    on_healthy: list[int] = []
    forced: dict[tuple[str, bool], list[int]] = {key: [] for key in by_rack}
    groups: dict[_Group, list[int]] = {}
    for job in jobs:
        if job.need <= 0:
            continue
        group, healthy_racks = _classify(job, by_rack, healthy)
        open_racks, only_healthy, _ = group
        everything += [job.size] * job.need
        if only_healthy:
            on_healthy += [job.size] * job.need
        if len(open_racks) <= job.need:
            for rack in open_racks:
                forced[(rack, rack not in healthy_racks)].append(job.size)
        groups.setdefault(group, []).append(job.size)
    bound = max(_fewest(everything, len(receivers), cap), _fewest(on_healthy, len(healthy), cap))
    for key, sizes in forced.items():
        bound = max(bound, _fewest(sizes, len(by_rack[key]), cap))
    for n_healthy, n_all, inside in _in_groups(groups, by_rack):
        bound = max(bound, _fewest([s for w, n, h in inside if h for s in w * n], n_healthy, cap),
                    _fewest([s for w, n, _ in inside for s in w * n], n_all, cap))
    return bound


def _fewest(sizes: list[int], brokers: int, cap: int) -> int:
    """The fewest replicas the busiest of `brokers` can hold when they hold `sizes`
    between them, none over `cap` bytes. A relaxation, so a lower bound: a broker holds
    at most the most of the smallest replicas that fit in `cap`; replicas over half of
    `cap` are on distinct brokers, and one of s bytes leaves room for what fits in
    `cap` - s. The least K at which these limits, each capped at K, add up to them all."""
    if not sizes or not brokers:
        return 0
    ordered = sorted(sizes)
    room = list(accumulate(ordered, initial=0))

    def most(free: int) -> int:
        return bisect_right(room, free) - 1

    big = [s for s in ordered[-brokers:] if 2 * s > cap]
    limits = [1 + most(cap - s) if s <= cap else 0 for s in big]
    limits += [most(cap)] * (brokers - len(big))
    n = len(ordered)
    if sum(limits) < n:
        return n  # no plan within `cap`: any figure is a bound
    lo, hi = _ceil(n, brokers), n
    while lo < hi:
        k = (lo + hi) // 2
        if sum(min(k, lim) for lim in limits) >= n:
            hi = k
        else:
            lo = k + 1
    return lo


def rack_shares(ordered: list[Job], receivers: list[Receiver]) -> dict[int, dict[str | None, int]]:
    """Per job position, each rack's share: what the rack rule sends to the rack in the
    jobs after this one, over the rack's healthy receivers."""
    forced = _forced(ordered, receivers)
    pending: dict[str | None, int] = {}
    for job, into in zip(ordered, forced, strict=True):
        for rack in into:
            pending[rack] = pending.get(rack, 0) + job.size
    hosts: dict[str | None, int] = {}
    for r in receivers:
        if not r.degraded:
            hosts[r.rack] = hosts.get(r.rack, 0) + 1
    out: dict[int, dict[str | None, int]] = {}
    for k, (job, into) in enumerate(zip(ordered, forced, strict=True)):
        for rack in into:
            pending[rack] -= job.size
        out[k] = {rack: w // hosts[rack] for rack, w in pending.items() if rack in hosts}
    return out


def _forced(ordered: list[Job], receivers: list[Receiver]) -> list[set[str | None]]:
    """Per job, the racks the rack rule sends one of its new replicas to: its open
    racks when they number no more than its new replicas."""
    by_rack: dict[str | None, set[int]] = {}
    for r in receivers:
        if r.rack is not None:
            by_rack.setdefault(r.rack, set()).add(r.broker)
    out: list[set[str | None]] = []
    for job in ordered:
        open_racks: set[str | None] = {rack for rack, bs in by_rack.items()
                                       if rack not in job.kept_racks and bs - job.exclude}
        out.append(open_racks if len(open_racks) <= job.need else set())
    return out


def _group_bound(groups: dict[_Group, int],
                 by_rack: _ByRack) -> int:
    """Per rack group (`_in_groups`): what must go to it over its brokers (the healthy
    ones for what needs no degraded broker, all for all)."""
    bound = 0
    for n_healthy, n_all, inside in _in_groups(groups, by_rack):
        on_healthy = sum(w * n for w, n, healthy in inside if healthy)
        anywhere = sum(w * n for w, n, _ in inside)
        bound = max(bound, _ceil(on_healthy, n_healthy), _ceil(anywhere, n_all))
    return bound


def _in_groups(groups: dict[_Group, W], by_rack: _ByRack
                  ) -> Iterator[tuple[int, int, list[tuple[W, int, bool]]]]:
    """Per rack group G (each job's open racks, and each union of two): G's healthy
    brokers, all its brokers, and per group of jobs (weight, new replicas that must go to
    G, healthy only). A job with open racks O puts min(need, |O|) new replicas on distinct
    racks of O, so at least that less |O - G| of them in G."""
    sets = sorted({g for g, _, _ in groups}, key=lambda g: sorted(g))
    unions = set(sets) | {a | b for i, a in enumerate(sets) for b in sets[i + 1:]}
    for g in sorted(unions, key=lambda g: sorted(g)):
        n_healthy = sum(len(by_rack.get((rack, False), ())) for rack in g)
        n_all = n_healthy + sum(len(by_rack.get((rack, True), ())) for rack in g)
        yield n_healthy, n_all, [(w, spread - len(o - g), healthy) for (o, healthy, spread), w
                                 in groups.items() if spread > len(o - g)]


def _ceil(a: int, b: int) -> int:
    return -(-a // b) if b else 0
