//! `core/plan/flow.py` and the level loop of `core/plan/sticky_assignor.py`: the
//! cooperative-sticky planner's min-cost flow, the same augmenting paths in the same
//! order (the same queue, edge order and strict `<`), so the same flow on every edge.

use pyo3::prelude::*;
use std::collections::{HashMap, VecDeque};

/// One arc: head, capacity left, cost. An edge and its reverse are partners (`rev`).
/// The arcs out of a node given at the start sit together in flow.py's order, so the
/// search reads them in one sweep; those added later (the levels) follow in `extra`.
#[derive(Clone, Copy)]
struct Arc {
    to: u32,
    cap: i32,
    cost: i64,
}

struct Flow {
    arcs: Vec<Arc>,
    rev: Vec<u32>,
    start: Vec<u32>, // node u's first arcs: start[u]..start[u + 1]
    open: Vec<u64>,  // bit e: first arc e has capacity left (most reverse arcs have none)
    extra: Vec<Vec<u32>>,
    // The first arcs' heads and costs again, packed (8 bytes an arc, not 16): the sweep
    // reads only these, and at 170,000 arcs a search is bound by reading them.
    head: Vec<u32>,
    price: Vec<i32>,
}

impl Flow {
    /// flow.py's graph (edge 2i and its reverse 2i + 1) laid out by tail node, each
    /// node's arcs in the order flow.py scans them; `pos[i]` is where edge i went.
    fn laid_out(nodes: usize, to: &[usize], cap: &[i64], cost: &[i64]) -> (Flow, Vec<usize>) {
        let mut start = vec![0u32; nodes + 1];
        for e in 0..to.len() {
            start[to[e ^ 1] + 1] += 1;
        }
        for u in 0..nodes {
            start[u + 1] += start[u];
        }
        let mut next: Vec<usize> = start.iter().map(|&x| x as usize).collect();
        let mut pos = vec![0usize; to.len()];
        for e in 0..to.len() {
            let tail = to[e ^ 1];
            pos[e] = next[tail];
            next[tail] += 1;
        }
        let mut arcs = vec![
            Arc {
                to: 0,
                cap: 0,
                cost: 0
            };
            to.len()
        ];
        let mut rev = vec![0u32; to.len()];
        for e in 0..to.len() {
            arcs[pos[e]] = Arc {
                to: to[e] as u32,
                cap: cap[e] as i32,
                cost: cost[e],
            };
            rev[pos[e]] = pos[e ^ 1] as u32;
        }
        let mut open = vec![0u64; to.len().div_ceil(64)];
        for (e, arc) in arcs.iter().enumerate() {
            if arc.cap > 0 {
                open[e / 64] |= 1 << (e % 64);
            }
        }
        let extra = vec![Vec::new(); nodes];
        let head = arcs.iter().map(|a| a.to).collect();
        let price = arcs.iter().map(|a| a.cost as i32).collect();
        (
            Flow {
                arcs,
                rev,
                start,
                open,
                extra,
                head,
                price,
            },
            pos,
        )
    }

    fn add(&mut self, a: usize, b: usize, cap: i32, cost: i64) -> usize {
        let e = self.arcs.len();
        self.arcs.push(Arc {
            to: b as u32,
            cap,
            cost,
        });
        self.arcs.push(Arc {
            to: a as u32,
            cap: 0,
            cost: -cost,
        });
        self.rev.push(e as u32 + 1);
        self.rev.push(e as u32);
        self.extra[a].push(e as u32);
        self.extra[b].push(e as u32 + 1);
        e
    }

    /// `MinCostFlow.augment`: the arcs of the path pushed (sink first), empty if none.
    /// Distances stay below `UNREACHED`: the caller bounds every path's cost.
    fn augment(
        &mut self,
        source: usize,
        sink: usize,
        dist: &mut [i64],
        back: &mut [u32],
        queued: &mut [bool],
        queue: &mut VecDeque<u32>,
    ) -> Vec<usize> {
        dist.fill(UNREACHED);
        queued.fill(false);
        dist[source] = 0;
        queue.push_back(source as u32);
        while let Some(u) = queue.pop_front() {
            let u = u as usize;
            queued[u] = false;
            let du = dist[u];
            let (lo, hi) = (self.start[u] as usize, self.start[u + 1] as usize);
            // The sweep over the node's first arcs, then its later ones: one loop over
            // a chain of both is a third slower.
            let mut relax = |e: usize, v: usize, cost: i64| {
                let through = du + cost;
                if through < dist[v] {
                    dist[v] = through;
                    back[v] = e as u32;
                    if !queued[v] {
                        queued[v] = true;
                        queue.push_back(v as u32);
                    }
                }
            };
            // Only the first arcs with capacity left, in order, read from their bits.
            let mut w = lo / 64;
            while w * 64 < hi {
                let mut bits = self.open[w];
                if w * 64 < lo {
                    bits &= !0u64 << (lo % 64);
                }
                if (w + 1) * 64 > hi {
                    bits &= (1u64 << (hi % 64)) - 1;
                }
                while bits != 0 {
                    let e = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    // Open: capacity left, so only the head and the cost are read.
                    relax(e, self.head[e] as usize, i64::from(self.price[e]));
                }
                w += 1;
            }
            for &e in &self.extra[u] {
                let arc = &self.arcs[e as usize];
                if arc.cap > 0 {
                    relax(e as usize, arc.to as usize, arc.cost);
                }
            }
        }
        if dist[sink] == UNREACHED {
            return Vec::new();
        }
        let mut path = Vec::new();
        let mut v = sink;
        while v != source {
            let e = back[v] as usize;
            path.push(e);
            v = self.arcs[self.rev[e] as usize].to as usize;
        }
        let push = path.iter().map(|&e| self.arcs[e].cap).min().unwrap_or(0);
        for &e in &path {
            let r = self.rev[e] as usize;
            self.arcs[e].cap -= push;
            self.arcs[r].cap += push;
            for a in [e, r] {
                if a < self.start[self.start.len() - 1] as usize {
                    let bit = 1u64 << (a % 64);
                    if self.arcs[a].cap > 0 {
                        self.open[a / 64] |= bit;
                    } else {
                        self.open[a / 64] &= !bit;
                    }
                }
            }
        }
        path
    }
}

/// "No distance yet" (flow.py's None): above any path's cost, which `sticky_flow` bounds.
const UNREACHED: i64 = i64::MAX;

/// The sticky planner's flow from its graph as built so far (`to`, `cap`, `cost`: every
/// edge and its reverse, in the order added; `nodes` of them), then a level-0 edge to
/// the sink per member node (`level_nodes`, `level_caps`), each node's next level
/// added when its top one fills, `big * (2 * level + 1)` a partition. Returns the
/// capacity left on each of the given edges; None when a figure does not fit.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn sticky_flow(
    nodes: usize,
    to: Vec<usize>,
    cap: Vec<i64>,
    cost: Vec<i64>,
    level_nodes: Vec<usize>,
    level_caps: Vec<i64>,
    big: i64,
    source: usize,
    sink: usize,
) -> Option<Vec<i64>> {
    let edges = to.len();
    if !edges.is_multiple_of(2)
        || cap.len() != edges
        || cost.len() != edges
        || level_nodes.len() != level_caps.len()
        || source >= nodes
        || sink >= nodes
        || to.iter().chain(&level_nodes).any(|&v| v >= nodes)
    {
        return None;
    }
    // Every path's cost within i64 with room to spare: |cost| per arc times the nodes
    // on a path, the dearest level included (a level is added only when the one below
    // is full, so none passes the flow out of the source).
    let total: i128 = (0..edges)
        .step_by(2)
        .filter(|&e| to[e + 1] == source)
        .map(|e| i128::from(cap[e].max(0)))
        .sum();
    let dearest = cost.iter().map(|&c| i128::from(c).abs()).max().unwrap_or(0);
    let top_level = i128::from(big) * (2 * total + 3);
    // Capacities in i32: no arc ever holds more than its edge's capacity.
    let fits = |c: &i64| (0..1 << 30).contains(c);
    if nodes >= u32::MAX as usize / 2
        || edges >= u32::MAX as usize / 2
        || total >= 1 << 30
        || !cap.iter().chain(&level_caps).all(fits)
        || (0..edges).step_by(2).any(|e| cost[e + 1] != -cost[e])
        || !cost.iter().all(|&c| i32::try_from(c).is_ok())
        || dearest.max(top_level) * (nodes as i128 + 1) >= i128::from(i64::MAX / 2)
    {
        return None;
    }
    let (mut flow, pos) = Flow::laid_out(nodes, &to, &cap, &cost);
    let mut top: HashMap<usize, (usize, i64)> = HashMap::new(); // level edge -> (k, level)
    for (k, (&node, &c)) in level_nodes.iter().zip(&level_caps).enumerate() {
        let e = flow.add(node, sink, c as i32, big);
        top.insert(e, (k, 0));
    }
    let mut dist = vec![UNREACHED; nodes];
    let mut back = vec![0u32; nodes];
    let mut queued = vec![false; nodes];
    let mut queue = VecDeque::new();
    loop {
        let path = flow.augment(source, sink, &mut dist, &mut back, &mut queued, &mut queue);
        let Some(&last) = path.first() else { break };
        if flow.arcs[last].cap == 0 {
            if let Some((k, level)) = top.remove(&last) {
                let next = level + 1;
                let e = flow.add(
                    level_nodes[k],
                    sink,
                    level_caps[k] as i32,
                    big * (2 * next + 1),
                );
                top.insert(e, (k, next));
            }
        }
    }
    Some(pos.iter().map(|&p| i64::from(flow.arcs[p].cap)).collect())
}
