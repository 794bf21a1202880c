"""The offline planner's improvement rounds (core/plan/spread.py): moves, swaps, chains
and paths that lower the most bytes received, then the most replicas received without
raising the bytes past what counts as reached. docs/planning.md says each step."""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.plan.spread import Job, _State

CHAIN_HOPS = 4  # moves in one chain that evens out replicas
FIRST_MOVES = 8  # B's replicas `paths_two` starts from one at a time: the search's cost

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


class Improver:
    """Moves, swaps, chains and paths off the busiest receiver while one lowers it; then
    off the receiver with the most replicas, with exchanges of several for one too."""

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

    def run(self, rounds: int, bound: int, two: bool = False) -> None:
        """Lower the most bytes received; stop within 0.1% of `bound` (the lower bound).
        Each round: the best move or swap off the busiest, else the best two-step chain,
        else the first `path` (every broker on it under the peak after)."""
        got = self.state.got
        for _ in range(rounds):
            top = max(got.values(), default=0)
            if top * 1000 <= bound * 1001:
                return
            b = min(x for x in self.brokers if got[x] == top)
            by_load = sorted(self.brokers, key=lambda x: (got[x], x))
            steps = (self.move_or_swap(b, top, by_load) or self.chain(b, top, by_load)
                     or self.path(b, top - 1) or (two and self.paths_two(b, top - 1)))
            if not steps:
                return
            for step in steps:
                self.apply(step)

    def even_counts(self, rounds: int, bound: int, bytes_bound: int) -> None:
        """Lower the most replicas received without raising the most bytes received
        past the ceiling: the peak bytes, or the bytes bound + 0.1% when higher (what
        `run` counts as reached).

        Each round takes the receiver with the most replicas (the lowest id among
        equals), B, and stops at `bound`. A move of one of its replicas to a receiver C
        with two replicas fewer that stays within the ceiling, the least key (C's
        replicas after, C's bytes after, job order, C); else an exchange of two of B's
        for one of C's, the least key (C's replicas after, the larger bytes after of B and
        C, the job orders of B's two, C, the job order of C's); else a `path` to a D with
        two replicas fewer; else a `count_bundle`."""
        got, count = self.state.got, self.state.count
        ceiling = max(max(got.values(), default=0), bytes_bound * 1001 // 1000)
        for _ in range(rounds):
            most = max(count.values(), default=0)
            if most <= bound:
                return
            b = min(x for x in self.brokers if count[x] == most)
            steps = (self.count_move(b, most, ceiling) or self.count_exchange(b, most, ceiling)
                     or self.path(b, ceiling, most) or self.count_bundle(b, most, ceiling))
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

    def path(self, b: int, limit: int, most: int | None = None, two: bool = False,
             first: tuple[int, int] | None = None) -> list[Step]:
        """Moves B -> C1 -> ... -> D (at most CHAIN_HOPS), each of a different job: each
        broker passes one replica on and keeps at most `limit` bytes, D takes the last
        within `limit` (and, with `most`, ends two replicas under it). A broker may come
        back at a later hop (a cycle through B too), its bytes counted with the path's
        moves. A Dijkstra search over (broker, hops) by the bytes arriving (less arriving
        leaves more to pass on), ties by hops then broker id; the first D popped wins."""
        got, count = self.state.got, self.state.count
        # (broker, hops) -> (bytes arriving, the path of steps that brings them)
        best: dict[tuple[int, int], tuple[int, list[Step]]] = {}
        heap: list[tuple[int, int, int]] = []  # (bytes arriving, hops, broker)

        def offer(d: int, hops: int, t: int, steps: list[Step]) -> None:
            if (d, hops) not in best or t < best[d, hops][0]:
                best[d, hops] = (t, steps)
                heapq.heappush(heap, (t, hops, d))

        for s, k in self.on[b] if first is None else [first]:
            if got[b] - s > limit:
                continue
            for c in self.brokers:
                if c != b and self.fits(k, b, c):
                    offer(c, 1, s, [(k, b, c)])
        done: set[tuple[int, int]] = set()
        while heap:
            s, hops, c = heapq.heappop(heap)
            if (c, hops) in done or best[c, hops][0] != s:
                continue
            done.add((c, hops))
            steps = best[c, hops][1]
            load, n = got[c], count[c]
            for k, src, dst in steps:
                size = self.ordered[k].size
                load += size * ((dst == c) - (src == c))
                n += (dst == c) - (src == c)
            if load <= limit and (most is None or n < most):
                return steps
            if hops == CHAIN_HOPS:
                continue
            moved = {k for k, _, _ in steps}
            if two and (pair := self.pass_two(c, load - limit, limit, steps, moved)):
                return [*steps, *pair]
            items = self.on[c]
            for t, k2 in items[bisect_left(items, (load - limit, -1)):]:
                if k2 in moved:
                    continue
                for d in self.brokers:
                    if d != c and (d, hops + 1) not in done and self.fits(k2, c, d):
                        offer(d, hops + 1, t, [*steps, (k2, c, d)])
        return []

    def paths_two(self, b: int, limit: int) -> list[Step]:
        """The first `path` that may end where a broker passes two replicas on, tried
        from each of B's FIRST_MOVES largest replicas in turn, largest first (one search
        from all of them keeps, per broker and hop, only the path that brings the fewest
        bytes, which is the smallest replica's)."""
        for first in self.on[b][::-1][:FIRST_MOVES]:
            if steps := self.path(b, limit, two=True, first=first):
                return steps
        return []

    def pass_two(self, c: int, excess: int, limit: int, steps: list[Step], moved: set[int]
                 ) -> list[Step]:
        """Two of C's replicas, each smaller than `excess` (one that is not would make C
        the path's end by itself), each to the broker with the most room under `limit`
        that may take it, the path's moves counted; together at least `excess`. The
        pair passing on the fewest bytes, then by job positions. Where a path ends at a
        broker that must pass two replicas on."""
        after = dict.fromkeys(self.brokers, 0)
        for k, src, dst in steps:
            size = self.ordered[k].size
            after[src] -= size
            after[dst] += size
        room = {d: limit - self.state.got[d] - after[d] for d in self.brokers}
        options: list[tuple[int, int, list[int]]] = []  # (size, job position, targets)
        for t, k in self.on[c]:
            if t >= excess:
                break
            if k in moved:
                continue
            targets = sorted((d for d in self.brokers
                              if d != c and room[d] >= t and self.fits(k, c, d)),
                             key=lambda d: (-room[d], d))
            if targets:
                options.append((t, k, targets))
        best: tuple[int, int, int, int, int] | None = None
        for x, (tx, kx, dx) in enumerate(options):
            for ty, ky, dy in options[x + 1:]:
                if tx + ty < excess or (best is not None and tx + ty > best[0]):
                    continue
                d1 = dx[0]
                d2 = next((d for d in dy if d != d1 or room[d] >= tx + ty), None)
                if d2 is not None and (best is None or (tx + ty, kx, ky) < best[:3]):
                    best = (tx + ty, kx, ky, d1, d2)
        if best is None:
            return []
        _, kx, ky, d1, d2 = best
        return [(kx, c, d1), (ky, c, d2)]

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

    def count_bundle(self, b: int, most: int, ceiling: int) -> list[Step]:
        """Some of B's replicas (two or more) for one larger of C's, C with two replicas
        fewer than B: B's that may go to C taken largest first, each while the bundle fits
        C's room under the ceiling plus what C gives, until B is within the ceiling too
        (C ends at least two under B's count before). The least key (the larger count
        after of B and C, the larger bytes after, C, C's job position). It lets a broker
        that fills its rack group's room with a few large replicas trade them for many
        small ones."""
        got, count = self.state.got, self.state.count
        best: tuple[int, ...] | None = None
        best_steps: list[Step] = []
        for c in self.brokers:
            if c == b or count[c] + 1 >= most:
                continue
            mine = sorted(((s, k) for s, k in self.on[b] if self.fits(k, b, c)), reverse=True)
            if len(mine) < 2:
                continue
            for t, k3 in self.on[c]:
                lo, hi = t - (ceiling - got[b]), t + (ceiling - got[c])
                if hi <= 0 or not self.fits(k3, c, b):
                    continue
                total = 0
                picked: list[int] = []
                for s, k in mine:
                    if total + s <= hi and count[c] + len(picked) < most - 1:
                        total += s
                        picked.append(k)
                        if total >= lo and len(picked) >= 2:
                            break
                if total < lo or len(picked) < 2:
                    continue
                n = len(picked)
                key = (max(most - n + 1, count[c] - 1 + n),
                       max(got[b] - total + t, got[c] + total - t), c, k3)
                if best is None or key < best:
                    best = key
                    best_steps = [*((k, b, c) for k in picked), (k3, c, b)]
        return best_steps

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
