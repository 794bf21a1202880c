"""Where the offline planner puts new replicas: the busiest receiver copies the least.

The problem, cut free of the snapshot: jobs (a partition's new replicas, each `size`
bytes) go to receivers (alive brokers with an online dir). Each job's brokers must keep
the rules: not a broker the partition already lists, as many racks as KIP-36 allows,
and, given that, as few brokers with an offline dir as possible. Among such plans we
minimise the most bytes any receiver gets; docs/planning.md says why and how, step by
step (the Rust port must give the same brokers).

1. Greedy, jobs by size descending (then partition index), each new replica to the
   least key (adds no rack, degraded, bytes received, replicas received, bytes held
   after, broker id).
2. Then moves, swaps and chains off the busiest receiver while one lowers its bytes
   (`_Improver.run`), and off the one with the most replicas while one lowers that
   without raising the peak bytes (`_Improver.even_counts`).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from core.plan.bounds import lower_bounds

CHAIN_HOPS = 4  # moves in one chain that evens out replicas
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
    least `need` receivers outside `exclude` (the caller leaves the others out)."""
    state = _State(receivers)
    tiers = (_Tier([r for r in receivers if not r.degraded], state),
             _Tier([r for r in receivers if r.degraded], state))
    placed: dict[int, list[int]] = {}
    ordered = order(jobs)
    for job in ordered:
        exclude = set(job.exclude)
        racks: set[str | None] = set(job.kept_racks)
        picks: list[int] = []
        for _ in range(job.need):
            b = _pick(tiers, racks, exclude)
            picks.append(b)
            exclude.add(b)
            racks.add(state.rack[b])
            state.add(b, job.size)
            tiers[state.degraded[b]].push(b, state.rack[b])
        placed[job.index] = picks
    # Each change lowers the loads sorted from the top, so the rounds end; the cap keeps
    # a pathological case from taking long (it is part of the algorithm: the port has it).
    rounds = 4 * len(ordered) + 16
    least_bytes, fewest = lower_bounds(jobs, receivers)
    improver = _Improver(ordered, placed, state)
    improver.run(rounds, least_bytes)
    improver.even_counts(rounds, fewest)
    return {j.index: tuple(placed[j.index]) for j in jobs}


def _pick(tiers: tuple[_Tier, _Tier], racks: set[str | None], exclude: set[int]) -> int:
    """Least key: a rack the job does not span yet first, then healthy, then the entry."""
    best: tuple[bool, int, _Entry] | None = None
    for rank, tier in enumerate(tiers):
        for rack in tier.heaps:
            entry = tier.best_in(rack, exclude)
            if entry is None:
                continue
            key = (rack is None or rack in racks, rank, entry)
            if best is None or key < best:
                best = key
    if best is None:
        raise ValueError("a job has fewer receivers than new replicas")
    return best[2][3]


# --- improving -------------------------------------------------------------------------

Step = tuple[int, int, int]  # (job position in the greedy's order, from broker, to broker)


def _shape(job: Job, brokers: list[int], state: _State) -> tuple[int, int]:
    """(racks spanned, degraded brokers) of a job's replicas: what a change must keep."""
    racks = set(job.kept_racks)
    racks.update(r for b in brokers if (r := state.rack[b]) is not None)
    return len(racks), sum(state.degraded[b] for b in brokers)


def _swapped(job: Job, brokers: list[int], out: int, into: int, state: _State) -> bool:
    """True when `into` may replace `out` among the job's new brokers."""
    if into in job.exclude or into in brokers:
        return False
    after = [into if b == out else b for b in brokers]
    return _shape(job, after, state) == _shape(job, brokers, state)


class _Improver:
    """Moves, swaps and two-step chains off the busiest receiver while one lowers it."""

    def __init__(self, ordered: list[Job], placed: dict[int, list[int]], state: _State) -> None:
        self.ordered, self.placed, self.state = ordered, placed, state
        # Per receiver: (size, job position) of its new replicas, sorted.
        self.on: dict[int, list[tuple[int, int]]] = {b: [] for b in state.got}
        for k, j in enumerate(ordered):
            for b in placed[j.index]:
                self.on[b].append((j.size, k))
        for items in self.on.values():
            items.sort()
        self.brokers = sorted(state.got)

    def run(self, rounds: int, bound: int) -> None:
        """Lower the most bytes received; stop within 0.1% of `bound` (the lower bound)."""
        got = self.state.got
        for _ in range(rounds):
            top = max(got.values(), default=0)
            if top * 1000 <= bound * 1001:
                return
            b = min(x for x in self.brokers if got[x] == top)
            by_load = sorted(self.brokers, key=lambda x: (got[x], x))
            steps = self.move_or_swap(b, top, by_load) or self.chain(b, top, by_load)
            if not steps:
                return
            for step in steps:
                self.apply(step)

    def even_counts(self, rounds: int, bound: int) -> None:
        """Lower the most replicas received without raising the most bytes received.

        Each round takes the receiver with the most replicas (the lowest id among
        equals), B, and stops at `bound`. A move of one of its replicas to a receiver C
        with two replicas fewer that stays within the peak bytes, the least key (C's
        replicas after, C's bytes after, job order, C); else an exchange of two of B's
        for one of C's, the least key (C's replicas after, the larger bytes after of B and
        C, the job orders of B's two, C, the job order of C's); else a chain through C to
        a D with two replicas fewer (`count_chain`)."""
        got, count = self.state.got, self.state.count
        ceiling = max(got.values(), default=0)
        for _ in range(rounds):
            most = max(count.values(), default=0)
            if most <= bound:
                return
            b = min(x for x in self.brokers if count[x] == most)
            steps = (self.count_move(b, most, ceiling) or self.count_exchange(b, most, ceiling)
                     or self.count_chain(b, most, ceiling))
            if not steps:
                return
            for step in steps:
                self.apply(step)

    def count_move(self, b: int, most: int, ceiling: int) -> list[Step]:
        got, count = self.state.got, self.state.count
        best: tuple[int, int, int, int] | None = None
        for s, k in self.on[b]:
            for c in self.brokers:
                if count[c] + 1 < most and got[c] + s <= ceiling and self.fits(k, b, c):
                    key = (count[c] + 1, got[c] + s, k, c)
                    if best is None or key < best:
                        best = key
        return [] if best is None else [(best[2], b, best[3])]

    def count_chain(self, b: int, most: int, ceiling: int) -> list[Step]:
        """A path of moves B -> C1 -> ... -> D (at most CHAIN_HOPS): each broker passes
        one replica on and keeps within the ceiling, D has two replicas fewer than B and
        takes the last one. Searched by the smallest bytes arriving at each broker (less
        arriving leaves more to pass on), ties by broker id; the first D reached wins."""
        got, count = self.state.got, self.state.count
        # broker -> (bytes arriving, hops, the path of steps that brings them)
        best: dict[int, tuple[int, int, list[Step]]] = {}
        heap: list[tuple[int, int, int]] = []  # (bytes arriving, broker, hops)
        for s, k in self.on[b]:
            for c in self.brokers:
                if c != b and (c not in best or s < best[c][0]) and self.fits(k, b, c):
                    best[c] = (s, 1, [(k, b, c)])
                    heapq.heappush(heap, (s, c, 1))
        done: set[int] = {b}
        while heap:
            s, c, hops = heapq.heappop(heap)
            if c in done or best[c][0] != s:
                continue
            done.add(c)
            path = best[c][2]
            if count[c] + 1 < most and got[c] + s <= ceiling:
                return path
            if hops == CHAIN_HOPS:
                continue
            moved = {k for k, _, _ in path}
            for t, k2 in self.on[c]:
                if k2 in moved or got[c] + s - t > ceiling:
                    continue
                for d in self.brokers:
                    if d in done or (d in best and best[d][0] <= t) or not self.fits(k2, c, d):
                        continue
                    best[d] = (t, hops + 1, [*path, (k2, c, d)])
                    heapq.heappush(heap, (t, d, hops + 1))
        return []

    def count_exchange(self, b: int, most: int, ceiling: int) -> list[Step]:
        got, count = self.state.got, self.state.count
        mine = self.on[b]
        best: tuple[int, ...] | None = None
        for c in self.brokers:
            if count[c] + 1 >= most:
                continue
            theirs = self.on[c]
            fit_b = [self.fits(k, b, c) for _, k in mine]
            for x in range(len(mine)):
                if not fit_b[x]:
                    continue
                for y in range(x + 1, len(mine)):
                    if not fit_b[y]:
                        continue
                    pair = mine[x][0] + mine[y][0]
                    # C's replica of t bytes: C and B both stay within the ceiling.
                    lo = bisect_left(theirs, (pair - (ceiling - got[c]), -1))
                    hi = bisect_right(theirs, (pair + (ceiling - got[b]), len(self.ordered)))
                    for t, k3 in theirs[lo:hi]:
                        if not self.fits(k3, c, b):
                            continue
                        peak = max(got[c] + pair - t, got[b] - pair + t)
                        key = (count[c] + 1, peak, mine[x][1], mine[y][1], c, k3)
                        if best is None or key < best:
                            best = key
        if best is None:
            return []
        _, _, k1, k2, c, k3 = best
        return [(k1, b, c), (k2, b, c), (k3, c, b)]

    def fits(self, k: int, out: int, into: int) -> bool:
        job = self.ordered[k]
        return _swapped(job, self.placed[job.index], out, into, self.state)

    def move_or_swap(self, b: int, top: int, by_load: list[int]) -> list[Step]:
        got, count = self.state.got, self.state.count
        best: tuple[int, ...] | None = None
        for s, k in self.on[b]:
            for c in by_load:
                gc = got[c]
                if gc >= top:
                    break  # C would end at or above the peak (B itself among them)
                if gc + s < top and self.fits(k, b, c):
                    key = (max(top - s, gc + s), 0, count[c] + 1, k, c, -1)
                    if best is None or key < best:
                        best = key
                items = self.on[c]  # swaps: C's replicas of t bytes, gc + s - top < t < s
                lo = bisect_right(items, (gc + s - top, len(self.ordered)))
                hi = bisect_left(items, (s, -1))
                for t, k2 in items[lo:hi]:
                    peak = max(top - s + t, gc - t + s)
                    if best is not None and peak > best[0]:
                        continue
                    if self.fits(k, b, c) and self.fits(k2, c, b):
                        key = (peak, 1, count[c], k, c, k2)
                        if best is None or key < best:
                            best = key
        if best is None:
            return []
        _, kind, _, k, c, k2 = best
        return [(k, b, c)] if kind == 0 else [(k, b, c), (k2, c, b)]

    def chain(self, b: int, top: int, by_load: list[int]) -> list[Step]:
        """B's replica to C, which passes one of its own (t bytes) on to D."""
        got = self.state.got
        best: tuple[int, ...] | None = None
        for s, k in self.on[b]:
            for c in by_load:
                gc = got[c]
                if gc >= top:
                    break
                if not self.fits(k, b, c):
                    continue
                items = self.on[c]
                lo = bisect_right(items, (gc + s - top, len(self.ordered)))
                for t, k2 in items[lo:]:
                    for d in by_load:
                        gd = got[d]
                        if gd + t >= top:
                            break
                        if d == b or not self.fits(k2, c, d):
                            continue
                        key = (max(top - s, gc + s - t, gd + t), k, c, k2, d)
                        if best is None or key < best:
                            best = key
                        break  # the lightest D that fits: the rest only weigh more
        if best is None:
            return []
        _, k, c, k2, d = best
        return [(k, b, c), (k2, c, d)]

    def apply(self, step: Step) -> None:
        k, src, dst = step
        job = self.ordered[k]
        brokers = self.placed[job.index]
        brokers[brokers.index(src)] = dst
        self.on[src].remove((job.size, k))
        self.state.add(src, job.size, -1)
        items = self.on[dst]
        items.insert(bisect_left(items, (job.size, k)), (job.size, k))
        self.state.add(dst, job.size)
