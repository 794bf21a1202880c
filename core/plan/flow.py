"""Min-cost flow for the consumer planner's small class graphs (a few hundred nodes):
members of a rack class to partitions of a replica-rack class, cost 1 across racks."""

from __future__ import annotations


class MinCostFlow:
    """Successive shortest paths (Bellman-Ford) for the small class graphs above."""

    def __init__(self, nodes: int) -> None:
        self.graph: list[list[int]] = [[] for _ in range(nodes)]
        self.to: list[int] = []
        self.cap: list[int] = []
        self.cost: list[int] = []
        self.initial: list[int] = []

    def add(self, a: int, b: int, cap: int, cost: int) -> int:
        e = len(self.to)
        for frm, dst, c, w in ((a, b, cap, cost), (b, a, 0, -cost)):
            self.graph[frm].append(len(self.to))
            self.to.append(dst)
            self.cap.append(c)
            self.cost.append(w)
            self.initial.append(c)
        return e

    def used(self, edge: int) -> int:
        return self.initial[edge] - self.cap[edge]

    def run(self, source: int, sink: int) -> None:
        n = len(self.graph)
        while True:
            dist: list[int | None] = [None] * n
            back: list[int] = [-1] * n
            dist[source] = 0
            changed = True
            while changed:
                changed = False
                for u in range(n):
                    du = dist[u]
                    if du is None:
                        continue
                    for e in self.graph[u]:
                        if self.cap[e] > 0:
                            v = self.to[e]
                            dv = dist[v]
                            if dv is None or du + self.cost[e] < dv:
                                dist[v] = du + self.cost[e]
                                back[v] = e
                                changed = True
            if dist[sink] is None:
                return
            path: list[int] = []
            v = sink
            while v != source:
                path.append(back[v])
                v = self.to[back[v] ^ 1]
            push = min(self.cap[e] for e in path)
            for e in path:
                self.cap[e] -= push
                self.cap[e ^ 1] += push
