"""Where the offline planner puts new replicas: the busiest receiver copies the least.

The problem, cut free of the snapshot: jobs (a partition's new replicas, each `size`
bytes) go to receivers (alive brokers with an online dir). Each job's brokers must keep
the rules: not a broker the partition already lists, as many racks as KIP-36 allows,
and, given that, as few brokers with an offline dir as possible. Among such plans we
minimise the most bytes any receiver gets; docs/planning.md says why and how, step by
step (the Rust port must give the same brokers).

1. Greedy, jobs by size descending (then partition index), each new replica to the
   least key (adds no rack, degraded, bytes received plus the rack's share of what
   the rack rule still sends there, bytes received, replicas received, bytes held
   after, broker id); run with the shares and without, the better plan kept.
2. Then moves, swaps and chains off the busiest receiver while one lowers its bytes
   (`Improver.run`; once stuck, again with paths that may end at a broker passing two
   replicas on), and off the one with the most replicas while one lowers that
   without raising the peak bytes past what counts as reached (`Improver.even_counts`).
   A chain (`Improver.path`) may pass through a broker twice: a cycle of moves. Failing
   all, several small replicas of the one with the most for one larger of another's
   (`Improver.count_bundle`). The improver lives in core/plan/spread_moves.py.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from core.plan.bounds import lower_bounds, rack_shares
from core.plan.spread_moves import Improver

_Entry = tuple[int, int, int, int]  # (bytes received, replicas received, bytes held, broker)


@dataclass(frozen=True, slots=True)
class Job:
    """One partition's new replicas: `need` of them, `size` bytes each."""

    index: int  # the partition's index in the snapshot: the last tie-break
    size: int
    need: int
    kept_racks: frozenset[str]  # racks of the surviving replicas (None left out)
    exclude: frozenset[int]  # brokers the partition lists now, online or not


@dataclass(frozen=True, slots=True)
class Receiver:
    broker: int
    rack: str | None
    degraded: bool  # has an offline dir: a last resort (and log dir "any")
    held: int  # bytes of replicas it holds now


def order(jobs: list[Job]) -> list[Job]:
    """The greedy's order: largest first, then by partition index."""
    return sorted(jobs, key=lambda j: (-j.size, j.index))


class _Tier:
    """The receivers of one tier (healthy or degraded), one lazy heap per rack."""

    def __init__(self, receivers: list[Receiver], state: _State) -> None:
        self.state = state
        self.heaps: dict[str | None, list[_Entry]] = {}
        for r in receivers:
            self.heaps.setdefault(r.rack, []).append(state.entry(r.broker))
        for heap in self.heaps.values():
            heapq.heapify(heap)

    def best_in(self, rack: str | None, exclude: set[int]) -> _Entry | None:
        heap = self.heaps[rack]
        held: list[_Entry] = []
        found: _Entry | None = None
        entry = self.state.entry
        while heap:
            top = heap[0]
            if top != entry(top[3]):
                heapq.heappop(heap)  # stale: the broker was pushed again with its new load
            elif top[3] in exclude:
                held.append(heapq.heappop(heap))
            else:
                found = top
                break
        for e in held:
            heapq.heappush(heap, e)
        return found

    def push(self, broker: int, rack: str | None) -> None:
        heapq.heappush(self.heaps[rack], self.state.entry(broker))


class _State:
    """Bytes and replicas received per receiver, and what each job got."""

    def __init__(self, receivers: list[Receiver]) -> None:
        self.got = {r.broker: 0 for r in receivers}
        self.count = {r.broker: 0 for r in receivers}
        self.held = {r.broker: r.held for r in receivers}
        self.rack = {r.broker: r.rack for r in receivers}
        self.degraded = {r.broker: r.degraded for r in receivers}

    def entry(self, b: int) -> _Entry:
        got = self.got[b]
        return (got, self.count[b], self.held[b] + got, b)

    def add(self, b: int, size: int, n: int = 1) -> None:
        """`n` replicas of `size` bytes more (fewer when `n` is negative)."""
        self.got[b] += size * n
        self.count[b] += n


def spread(jobs: list[Job], receivers: list[Receiver]) -> dict[int, tuple[int, ...]]:
    """Partition index -> its new brokers, in the order picked. Every job must have at
    least `need` receivers outside `exclude` (the caller leaves the others out).

    Two plans, the greedy's key without and with the racks' shares, each improved; the
    one with fewer (most bytes received, most replicas received) wins, the first on a
    tie. Neither alone is always better."""
    ordered = order(jobs)
    bounds = lower_bounds(jobs, receivers)
    plain, plain_state = _plan(ordered, receivers, bounds, {})
    placed, state = _plan(ordered, receivers, bounds, rack_shares(ordered, receivers))
    if _peaks(plain_state) <= _peaks(state):
        placed = plain
    return {j.index: tuple(placed[j.index]) for j in jobs}


def _peaks(state: _State) -> tuple[int, int]:
    return max(state.got.values(), default=0), max(state.count.values(), default=0)


def _plan(ordered: list[Job], receivers: list[Receiver], bounds: tuple[int, int],
          shares: dict[int, dict[str | None, int]]) -> tuple[dict[int, list[int]], _State]:
    """The greedy, then the improvement rounds."""
    state = _State(receivers)
    tiers = (_Tier([r for r in receivers if not r.degraded], state),
             _Tier([r for r in receivers if r.degraded], state))
    placed: dict[int, list[int]] = {}
    for k, job in enumerate(ordered):
        share = shares.get(k, {})
        exclude = set(job.exclude)
        racks: set[str | None] = set(job.kept_racks)
        picks: list[int] = []
        for _ in range(job.need):
            b = _pick(tiers, racks, exclude, share)
            picks.append(b)
            exclude.add(b)
            racks.add(state.rack[b])
            state.add(b, job.size)
            tiers[state.degraded[b]].push(b, state.rack[b])
        placed[job.index] = picks
    # Each change lowers the loads sorted from the top, so the rounds end; the cap keeps
    # a pathological case from taking long (it is part of the algorithm: the port has it).
    rounds = 4 * len(ordered) + 16
    improver = Improver(ordered, placed, state)
    improver.run(rounds, bounds[0])
    improver.run(rounds, bounds[0], two=True)  # where the first is stuck: bytes no worse
    improver.even_counts(rounds, bounds[1], bounds[0])
    return placed, state


def _pick(tiers: tuple[_Tier, _Tier], racks: set[str | None], exclude: set[int],
          share: dict[str | None, int]) -> int:
    """Least key: a rack the job does not span yet first, then healthy, then bytes
    received plus the rack's share of what the rack rule still sends there, the entry."""
    best: tuple[bool, int, int, _Entry] | None = None
    for rank, tier in enumerate(tiers):
        for rack in tier.heaps:
            entry = tier.best_in(rack, exclude)
            if entry is None:
                continue
            key = (rack is None or rack in racks, rank,
                   entry[0] + (share.get(rack, 0) if rank == 0 else 0), entry)
            if best is None or key < best:
                best = key
    if best is None:
        raise ValueError("a job has fewer receivers than new replicas")
    return best[3][3]
