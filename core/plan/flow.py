"""Min-cost flow for the consumer planner's class graphs (partition classes to member
classes; a few hundred to a few thousand nodes)."""

from __future__ import annotations

from collections import deque
from itertools import chain, repeat


class MinCostFlow:
    """Successive shortest paths; each path found with a queue-based Bellman-Ford (SPFA),
    since residual edges carry negative costs."""

    def __init__(self, nodes: int) -> None:
        self.graph: list[list[int]] = [[] for _ in range(nodes)]
        self.to: list[int] = []
        self.cap: list[int] = []
        self.cost: list[int] = []
        self.initial: list[int] = []

    def node(self) -> int:
        """A new node's index."""
        self.graph.append([])
        return len(self.graph) - 1

    def add(self, a: int, b: int, cap: int, cost: int) -> int:
        e = len(self.to)
        for frm, dst, c, w in ((a, b, cap, cost), (b, a, 0, -cost)):
            self.graph[frm].append(len(self.to))
            self.to.append(dst)
            self.cap.append(c)
            self.cost.append(w)
            self.initial.append(c)
        return e

    def fan_out(self, a: int, heads: list[int], cap: int, costs: list[int]) -> range:
        """`add(a, b, cap, cost)` for each head b (none of them `a`) and its cost, in
        order: the same edges, the same adjacency order, added in bulk."""
        first = len(self.to)
        edges = range(first, first + 2 * len(heads), 2)
        self.graph[a].extend(edges)
        for b, e in zip(heads, edges, strict=True):
            self.graph[b].append(e + 1)
        self.to.extend(chain.from_iterable(zip(heads, repeat(a))))
        self.cap.extend(chain.from_iterable(repeat((cap, 0), len(heads))))
        self.cost.extend(chain.from_iterable((c, -c) for c in costs))
        self.initial.extend(chain.from_iterable(repeat((cap, 0), len(heads))))
        return edges

    def used(self, edge: int) -> int:
        return self.initial[edge] - self.cap[edge]

    def augment(self, source: int, sink: int) -> list[int]:
        """Push flow along one cheapest source-sink path; its edges (empty: no path)."""
        n = len(self.graph)
        graph, to, cap, cost = self.graph, self.to, self.cap, self.cost
        dist: list[int | None] = [None] * n
        back = [-1] * n
        queued = [False] * n
        dist[source] = 0
        queue = deque([source])
        while queue:
            u = queue.popleft()
            queued[u] = False
            du = dist[u]
            assert du is not None
            for e in graph[u]:
                if cap[e] > 0:
                    v = to[e]
                    dv = dist[v]
                    if dv is None or du + cost[e] < dv:
                        dist[v] = du + cost[e]
                        back[v] = e
                        if not queued[v]:
                            queued[v] = True
                            queue.append(v)
        if dist[sink] is None:
            return []
        path: list[int] = []
        v = sink
        while v != source:
            path.append(back[v])
            v = to[back[v] ^ 1]
        push = min(cap[e] for e in path)
        for e in path:
            cap[e] -= push
            cap[e ^ 1] += push
        return path

    def run(self, source: int, sink: int) -> None:
        while self.augment(source, sink):
            pass
