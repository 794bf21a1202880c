"""The second half of leader balancing (core/plan/leaders.py): shortest chains of
hand-offs between brokers, chains that even out the racks, and the last pass that takes
back hand-offs the balance did not need. Each works on the plan's `Leadership` state."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.plan.leaders import Leadership


def chain_moves(state: Leadership) -> None:
    """Shortest chains from a broker to one with at least two fewer leaders."""
    count = state.count
    progress = True
    while progress:
        progress = False
        stuck: set[int] = set()
        for a in sorted(count, key=lambda b: -count[b]):
            while a not in stuck and count[a] >= min(count.values()) + 2:
                path, seen = _shortest_chain(state, [a], below=count[a] - 1)
                if path:
                    _apply(state, path)
                    progress = True
                else:
                    # Nothing a reaches has two fewer, so nothing reachable from a broker
                    # it reaches with at most a's count has either.
                    stuck.update(b for b in seen if count[b] <= count[a])


def rack_moves(state: Leadership) -> None:
    """Even out leaders per broker across racks with chains between brokers whose counts
    differ by one, so the broker spread stays as it is. Each move lowers the sum over
    racks of total^2 / brokers, so this ends."""
    if len(state.rack_size) < 2:
        return
    count = state.count
    total = state.rack_total
    size = state.rack_size
    while _one_rack_move(state, count, total, size):
        pass


def _one_rack_move(
    state: Leadership, count: dict[int, int], total: Counter[str], size: Counter[str]
) -> bool:
    for heavy in sorted(size, key=lambda r: -total[r] / size[r]):
        members = [b for b in count if state.rack[b] == heavy]
        for level in sorted({count[b] for b in members}, reverse=True):
            sources = [b for b in members if count[b] == level]
            path, _ = _shortest_chain(state, sources, below=level, lighter_than=heavy)
            if path:
                _apply(state, path)
                return True
    return False


def _shortest_chain(
    state: Leadership, sources: Iterable[int], below: int, lighter_than: str | None = None
) -> tuple[list[tuple[int, int]], set[int]]:
    """BFS over 'x leads a partition b could lead' from the sources to the nearest broker
    with fewer than `below` leaders (and, with `lighter_than`, on a rack that taking one
    leader from that rack evens out); returns the hand-offs [(partition, new leader)]
    and the brokers seen."""
    count = state.count
    parent: dict[int, tuple[int, int] | None] = {s: None for s in sources}
    if not any(
        count[b] < below and (lighter_than is None or state.evens_racks(lighter_than, b))
        for b in count
    ):
        return [], set(parent)  # no target anywhere: spare the full search
    frontier = list(parent)
    while frontier:
        nxt: list[int] = []
        for x in frontier:
            for i in state.led[x]:
                for b in state.candidates[i]:
                    if b in parent:
                        continue
                    parent[b] = (x, i)
                    if count[b] < below and (
                        lighter_than is None or state.evens_racks(lighter_than, b)
                    ):
                        path: list[tuple[int, int]] = []
                        node = b
                        while (step := parent[node]) is not None:
                            path.append((step[1], node))
                            node = step[0]
                        return path[::-1], set(parent)
                    nxt.append(b)
        frontier = nxt
    return [], set(parent)


def undo_detours(state: Leadership) -> None:
    """Take back changes the balance does not need. A partition moved o -> x goes back
    when x now has one leader more than o (the counts swap; racks must not get worse).
    And hand-off cycles that keep every count: p went o -> x while o took q from y, and
    y leads r that x could lead: p back to o, q back to y, r to x is one change fewer
    (likewise when o gave r to y and y took q from x)."""
    original, leader, cands, count = state.original, state.leader, state.candidates, state.count
    # holder -> origin -> parts, and origin -> holders: ordered sets (dicts), searched
    # in the order filled, as the compiled core does.
    moved_in: dict[int, dict[int, dict[int, None]]] = {b: {} for b in count}
    holders: dict[int, dict[int, None]] = {b: {} for b in count}
    moved: set[int] = set()

    def track(i: int, on: bool) -> None:
        o, b = original[i], leader[i]
        if o < 0 or b == o:
            return
        by_origin = moved_in[b].setdefault(o, {})
        if on:
            by_origin[i] = None
            holders[o][b] = None
            moved.add(i)
        else:
            by_origin.pop(i, None)
            if not by_origin:
                holders[o].pop(b, None)
            moved.discard(i)

    def move(i: int, to: int) -> None:
        track(i, False)
        state.move(i, to)
        track(i, True)

    for i in [i for i, (b, o) in enumerate(zip(leader, original, strict=True)) if b != o]:
        track(i, True)

    def undo(p: int) -> list[tuple[int, int]]:
        o, x = original[p], leader[p]
        if count[x] == count[o] + 1 and state.racks_no_worse(x, o):
            return [(p, o)]
        for y, taken in moved_in[o].items():  # o took q from y
            for q in taken:
                if y == x:
                    return [(p, o), (q, x)]  # a plain swap
                for r in state.led[y]:
                    if original[r] == y and x in cands[r]:
                        return [(p, o), (q, y), (r, x)]
        for y in holders[x]:  # y took q from x
            for r in state.led[o]:
                if r != p and original[r] == o and y in cands[r]:
                    q = next(iter(moved_in[y][x]))
                    return [(p, o), (r, y), (q, x)]
        return []

    improved = True
    while improved:
        improved = False
        for p in sorted(moved):
            if p in moved and (steps := undo(p)):
                for i, to in steps:
                    move(i, to)
                improved = True


def _apply(state: Leadership, path: list[tuple[int, int]]) -> None:
    # Hand-offs run from the far end back, so no broker ever dips below its count.
    for i, to in reversed(path):
        state.move(i, to)
