"""Balance partition leadership over alive brokers and racks, changing few leaders.

A partition can be led by a replica on an alive broker, on an online dir, in the ISR
(its candidates). Current leaders that are candidates stay; partitions without a usable
leader get their least loaded candidate. Then leadership moves from heavy to light
brokers: single hand-offs first (those that fix an excess and a deficit at once before
the rest), then shortest chains (a -> x -> b: x takes one of a's partitions and hands
one of its own to b), until no broker can pass a partition to one with two fewer. That
state has the smallest sum of squared counts, hence max - min <= 1 wherever the
candidate sets allow it. Chains between brokers whose counts differ by one then even
out the racks (leaders per broker of each rack) without unbalancing brokers, and a last
pass takes back hand-offs the balance turned out not to need.

The count of leader changes is near-minimal, not proven minimal (an exact min-cost flow
is too slow at 100,000 partitions): within 0.1% of a simple lower bound on the bench
cluster, and exact on >99% of small random clusters checked by brute force.

The plan reorders replica lists so each target leader is first (the preferred leader,
so Kafka's auto leader rebalance keeps it) and lists for a preferred election the
partitions whose leader changes.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from collections.abc import Callable, Iterable

from core.model import ClusterModel
from core.plan.formats import LeaderPlan, Reassignment, TopicPartition
from core.plan.leader_chains import chain_moves, rack_moves, undo_detours
from schemas import native
from schemas.plans import ANY_DIR, PartitionAssignment
from schemas.snapshot_columns import PartitionColumns


class Leadership:
    """Who leads what while the plan is made; every change after the start goes
    through `move`. Starts from the current leaders that are still candidates."""

    def __init__(self, model: ClusterModel) -> None:
        self.candidates = _candidates(model)
        n = len(self.candidates)
        self.leader = [-1] * n
        self.original = [-1] * n  # current leader, where still a candidate
        self.orphans: list[int] = []  # can be led, but not by their current leader
        eligible = sorted(set().union(*self.candidates))
        # Each broker's partitions as a dict used as an ordered set: the chains search
        # them in the order they were taken, the same in the compiled core (native/).
        self.led: dict[int, dict[int, None]] = {b: {} for b in eligible}
        leader, original, led = self.leader, self.original, self.led
        for i, (p, cands) in enumerate(zip(model.partitions, self.candidates, strict=True)):
            if p.leader in cands:
                leader[i] = original[i] = p.leader
                led[p.leader][i] = None
            elif cands:
                self.orphans.append(i)
        self.count: dict[int, int] = {b: len(s) for b, s in led.items()}
        self.rack = {b: model.rack_of[b] for b in self.count}
        self.rack_size = Counter(r for r in self.rack.values() if r is not None)
        self.rack_total: Counter[str] = Counter()
        for b, c in self.count.items():
            if (r := self.rack[b]) is not None:
                self.rack_total[r] += c
        # Leaders per broker of each rack (None: no rack, 0), kept up to date by `move`:
        # the direct pass asks for a broker's density millions of times at 2.8M replicas.
        self.rack_density: dict[str | None, float] = {
            r: t / self.rack_size[r] for r, t in self.rack_total.items()
        }
        self.rack_density[None] = 0.0

    def move(self, i: int, to: int) -> None:
        old = self.leader[i]
        if old >= 0:
            self.count[old] -= 1
            del self.led[old][i]
            if (r := self.rack[old]) is not None:
                self.rack_total[r] -= 1
                self.rack_density[r] = self.rack_total[r] / self.rack_size[r]
        self.leader[i] = to
        self.count[to] += 1
        self.led[to][i] = None
        if (r := self.rack[to]) is not None:
            self.rack_total[r] += 1
            self.rack_density[r] = self.rack_total[r] / self.rack_size[r]

    def evens_racks(self, heavy: str, broker: int) -> bool:
        """Would one leader moving from rack `heavy` to `broker`'s rack lower the sum of
        total^2 / size over racks (racks weighed by their broker count)?"""
        r = self.rack[broker]
        if r is None or r == heavy:
            return False
        total, size = self.rack_total, self.rack_size
        return (2 * total[r] + 1) * size[heavy] < (2 * total[heavy] - 1) * size[r]

    def racks_no_worse(self, source: int, target: int) -> bool:
        """Would one leader moving from `source`'s rack to `target`'s keep the rack
        balance (sum of total^2 / size over racks) from getting worse?"""
        a, b = self.rack[source], self.rack[target]
        if a == b or a is None or b is None:
            return a == b
        total, size = self.rack_total, self.rack_size
        return (2 * total[b] + 1) * size[a] <= (2 * total[a] - 1) * size[b]

    def density(self, broker: int) -> float:
        return self.rack_density[self.rack[broker]]


def _candidates(model: ClusterModel) -> list[tuple[int, ...]]:
    """Per partition, the replicas that could lead now: alive, online, in the ISR."""
    alive = model.alive
    suspect = model.brokers_with_offline_dir
    unsure = suspect | (set(model.brokers) - alive)
    is_offline = model.is_offline
    out: list[tuple[int, ...]] = []
    for p in model.partitions:
        isr = p.isr
        if len(isr) == len(p.replicas) and unsure.isdisjoint(isr):
            out.append(isr)  # the common case: every replica is in sync on a healthy broker
            continue
        out.append(
            tuple(
                r.broker
                for r in p.replicas
                if r.broker in alive
                and r.broker in isr
                and (r.broker not in suspect or not is_offline(r))
            )
        )
    return out


def plan_leaders(model: ClusterModel) -> LeaderPlan:
    """Replica-list reorders and the preferred-election list that balance leadership."""
    return _plan(model, _native_targets(model))


def plan_json(model: ClusterModel) -> str:
    """`plan_leaders(model)`'s JSON text, as `json.dumps(plan.to_json(),
    check_circular=False)` writes it. Over columns with the core built, the core writes
    it straight from the columns and its targets (no record, dict or plan object);
    where it refuses (a topic name json.dumps would escape), Python writes that plan."""
    targets = _native_targets(model)
    parts = model.partitions
    write = native.function("leader_plan_json")
    if targets is not None and write is not None and isinstance(parts, PartitionColumns):
        text: str | None = write(parts.columns, targets)
        if text is not None:
            return text
    return json.dumps(_plan(model, targets).to_json(), check_circular=False)


def _plan(model: ClusterModel, targets: Iterable[tuple[int, int]] | None) -> LeaderPlan:
    """The plan from the core's targets, or planned here when None."""
    if targets is None:
        state = Leadership(model)
        for i in state.orphans:
            cands = state.candidates[i]
            state.move(i, min(cands, key=lambda b: (state.count[b], state.density(b))))
        if state.count:
            _direct_moves(state)
            chain_moves(state)
            rack_moves(state)
            undo_detours(state)
        targets = enumerate(state.leader)

    parts = model.partitions
    if isinstance(parts, PartitionColumns):  # the fields of each partition named, no record
        return _write_out((parts.row(i), target) for i, target in targets if target >= 0)
    reorders: list[PartitionAssignment] = []
    election: list[TopicPartition] = []
    for i, target in targets:
        if target < 0:
            continue
        p = parts[i]
        if p.replicas[0].broker != target:
            order = (target, *(r.broker for r in p.replicas if r.broker != target))
            reorders.append(
                PartitionAssignment(p.topic, p.partition, order, (ANY_DIR,) * len(order))
            )
        if p.leader != target:
            election.append(TopicPartition(p.topic, p.partition))
    return LeaderPlan(Reassignment(tuple(reorders)), tuple(election))


def _write_out(rows: Iterable[tuple[tuple[str, int, int, tuple[int, ...]], int]]) -> LeaderPlan:
    """`plan_leaders`' write-out from (topic, partition, leader, replica brokers) rows."""
    reorders: list[PartitionAssignment] = []
    election: list[TopicPartition] = []
    for (topic, number, leader, brokers), target in rows:
        if brokers[0] != target:
            order = (target, *(b for b in brokers if b != target))
            reorders.append(PartitionAssignment(topic, number, order, (ANY_DIR,) * len(order)))
        if leader != target:
            election.append(TopicPartition(topic, number))
    return LeaderPlan(Reassignment(tuple(reorders)), tuple(election))


def _native_targets(model: ClusterModel) -> Iterable[tuple[int, int]] | None:
    """(partition index, target leader) of the partitions the compiled core's plan
    changes (its preferred leader or its leader), or None: no core, or a broker id past
    64 bits (the reference then plans)."""
    columns = isinstance(model.partitions, PartitionColumns)
    fast = native.function("leader_targets_columns" if columns else "leader_targets")
    if fast is None:
        return None
    parts = model.partitions
    try:
        found: list[tuple[int, int]] | None = fast(
            parts.columns if isinstance(parts, PartitionColumns) else parts,
            sorted(model.rack_of.items()),
            sorted(model.alive),
            sorted(model.brokers_with_offline_dir),
            sorted(model.offline_dirs),
        )
    except OverflowError:
        return None
    return found


def _direct_moves(state: Leadership) -> None:
    """Hand single partitions from heavy to light candidates, in three passes so each
    change does as much as it can: first from a broker over the ceiling to one under
    the floor (fixes both), then from over the ceiling to any broker two lighter, then
    to a broker under the floor from any broker two heavier. Within a pass each source
    serves its lightest candidates first, so it gives no more than it must."""
    count = state.count
    floor, extra = divmod(sum(count.values()), len(count))
    ceiling = floor + (1 if extra else 0)
    _direct_pass(state, source_over=ceiling, target_under=floor)
    _direct_pass(state, source_over=ceiling, target_under=None)
    _direct_pass(state, source_over=None, target_under=floor)


def _direct_pass(state: Leadership, source_over: int | None, target_under: int | None) -> None:
    """Single hand-offs from brokers with more than `source_over` leaders (any, if None)
    to candidates with fewer than `target_under` (any) and at least two fewer."""
    count = state.count

    def limit(ca: int) -> int:
        """Most leaders a target may have for a source with `ca` (-1: cannot give)."""
        if source_over is not None and ca <= source_over:
            return -1
        top = ca - 2
        return top if target_under is None else min(top, target_under - 1)

    moved = True
    while moved:
        moved = False
        # `low` only goes stale downwards (a source never drops below a target), so it
        # stays a safe bound for skipping brokers that cannot give.
        low = min(count.values())
        for a in sorted(count, key=lambda b: -count[b]):
            top = limit(count[a])
            if top < low:
                continue
            before = count[a]
            # While `a` gives, targets only get heavier and its own limit only falls: a
            # candidate too heavy now stays too heavy, so each offer keeps only the
            # candidates that may still take it (3 at RF 3 become the one or two light ones).
            _give(state, a, top, low, limit)
            if count[a] != before:
                moved = True


def _give(state: Leadership, a: int, top: int, low: int, limit: Callable[[int], int]) -> None:
    """One source's hand-offs, lightest target first; an offer whose target got heavier
    since it was made goes back in the queue at its new weight, and once `a` may give to
    nobody (its limit under every count) the offers left would all be dropped.

    Queue entries are (leaders, rack density, partition, tag). Offers with two or more
    possible targets queue one by one (tag -1). Offers with one possible target b behave
    alike, so they queue as groups, one per (b, weight) with its partitions in `solo`,
    listed by falling index, and a group going stale moves to b's new weight in one step
    instead of one partition at a time; tag b names the group by its smallest partition.
    The order of hand-offs is the one-by-one queue's: ties keep going by partition.
    """
    # An offer goes to its lightest candidate with at most `top` leaders; a tie goes to
    # the one on the lighter rack, then to the first listed. That choice is written out
    # in the two loops below, with the rack densities read directly: they run once per
    # offer and once per stale entry, a million times each at 2.8M replicas.
    count, density, candidates = state.count, state.density, state.candidates
    rack, rack_density = state.rack, state.rack_density
    heappop, heapreplace = heapq.heappop, heapq.heapreplace
    others: dict[int, list[int]] = {}
    solo: dict[tuple[int, int, float], list[int]] = {}
    offers: list[tuple[int, float, int, int]] = []
    for i in state.led[a]:
        light = [b for b in candidates[i] if b != a and count[b] <= top]
        if not light:
            continue
        b = light[0]
        if len(light) == 1:
            solo.setdefault((b, count[b], rack_density[rack[b]]), []).append(i)
            continue
        cb = count[b]
        for x in light:  # the lightest, then on the lighter rack, then the first listed
            cx = count[x]
            if cx < cb or (cx == cb and rack_density[rack[x]] < rack_density[rack[b]]):
                b, cb = x, cx
        others[i] = light
        offers.append((cb, rack_density[rack[b]], i, -1))
    for (b, w, d), group in solo.items():
        group.sort(reverse=True)
        offers.append((w, d, group[-1], b))
    heapq.heapify(offers)

    def join(b: int, key: tuple[int, float], parts: list[int]) -> None:
        """Queue `parts` (falling order), offers to b alone, at b's weight `key`."""
        group = solo.get((b, *key))
        if group is None:
            solo[(b, *key)] = parts
        elif parts[-1] < group[-1]:
            parts = solo[(b, *key)] = sorted(group + parts, reverse=True)
        else:
            group[:] = sorted(group + parts, reverse=True)
            return
        heapq.heappush(offers, (*key, parts[-1], b))

    while offers and low <= top >= offers[0][0]:
        # Every entry of the lightest weight, by partition, until one is ready to move:
        # the stale ones before it move to their new weight under the same counts.
        weight, dens = offers[0][0], offers[0][1]
        stale: dict[int, list[int]] = {}  # solo groups of this weight, all stale now
        ready = -1  # the partition that moves next (-1: none at this weight)
        target = -1
        while offers and offers[0][0] == weight and offers[0][1] == dens:
            _, _, i, tag = offers[0]
            if tag < 0:
                light = others[i]
                b, cb = -1, top
                for x in light:
                    cx = count[x]
                    if cx > cb or (
                        cx == cb and b >= 0 and rack_density[rack[x]] >= rack_density[rack[b]]
                    ):
                        continue
                    b, cb = x, cx
                if b < 0:
                    heappop(offers)
                    continue
                db = rack_density[rack[b]]
                if cb > weight or (cb == weight and db > dens):
                    if len(light) == 2:  # RF 3: the list comprehension, written out
                        x, y = light
                        if count[x] > top:
                            light = [y]
                        elif count[y] > top:
                            light = [x]
                    else:
                        light = [x for x in light if count[x] <= top]
                    if len(light) == 1:
                        del others[i]
                        heappop(offers)
                        join(b, (cb, db), [i])
                    else:
                        # Popping the stale entry and pushing it at its new weight in
                        # one step: a million times at 2.8M replicas. Equal entries are
                        # equal tuples, so the order of what comes out is unchanged.
                        others[i] = light
                        heapreplace(offers, (cb, db, i, -1))
                    continue
                heappop(offers)
                ready, target = i, b
                break
            heappop(offers)
            found = solo.get((tag, weight, dens))
            if tag in stale or found is None or found[-1] != i:
                continue  # an older head of a group that has since changed
            group = found
            cb = count[tag]
            if cb > top:
                del solo[(tag, weight, dens)]  # b may take none of them any more
                continue
            db = density(tag)
            if cb > weight or (cb == weight and db > dens):
                stale[tag] = group
                continue
            ready, target = i, tag
            group.pop()
            if group:
                heapq.heappush(offers, (weight, dens, group[-1], tag))
            else:
                del solo[(tag, weight, dens)]
            break
        for b, group in stale.items():
            cut = len(group)
            while cut and (ready < 0 or group[cut - 1] < ready):
                cut -= 1
            join(b, (count[b], density(b)), group[cut:])
            del group[cut:]
            if group:
                heapq.heappush(offers, (weight, dens, group[-1], b))
            else:
                del solo[(b, weight, dens)]
        if ready >= 0:
            state.move(ready, target)
            top = limit(count[a])


def explain(model: ClusterModel, plan: LeaderPlan) -> str:
    """Leaders per broker and per rack, before and after; how many leaders change."""
    before = Counter(p.leader for p in model.partitions if p.leader >= 0)
    after = Counter(before)
    index = model.partition_index()
    targets = {(a.topic, a.partition): a.replicas[0] for a in plan.reassignment.partitions}
    for tp in plan.election:
        p = model.partitions[index[(tp.topic, tp.partition)]]
        new = targets.get((tp.topic, tp.partition), p.replicas[0].broker)
        if p.leader >= 0:
            after[p.leader] -= 1
        after[new] += 1
    brokers = sorted(b for b in model.alive)

    def spread(c: Counter[int]) -> str:
        values = [c[b] for b in brokers] or [0]
        return f"min {min(values)}, max {max(values)}"

    def racks(c: Counter[int]) -> str:
        per: Counter[str] = Counter()
        for b, n in c.items():
            if (r := model.rack_of.get(b)) is not None:
                per[r] += n
        return ", ".join(f"{r}={per[r]}" for r in sorted(per)) or "no racks"

    return "\n".join(
        [
            (
                f"{len(plan.election)} partitions change leader; "
                f"{len(plan.reassignment.partitions)} replica lists reordered (no data moves)"
            ),
            f"leaders per alive broker: {spread(before)} -> {spread(after)}",
            f"leaders per rack before: {racks(before)}",
            f"leaders per rack after:  {racks(after)}",
        ]
    )
