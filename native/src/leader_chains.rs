//! `core/plan/leader_chains.py`: shortest chains of hand-offs, the chains that even out
//! the racks, and the last pass that takes back hand-offs the balance did not need.

use std::collections::HashMap;

use crate::leader_direct::by_falling_count;
use crate::leaders::{Sets, State, NONE};

/// `leader_chains.chain_moves`.
pub fn chain_moves(state: &mut State) {
    let mut progress = true;
    while progress {
        progress = false;
        let mut stuck = vec![false; state.brokers()];
        for a in by_falling_count(state) {
            let a = a as usize;
            while !stuck[a] && state.count[a] >= state.count.iter().min().unwrap_or(&0) + 2 {
                let (path, seen) = shortest_chain(state, &[a as u32], state.count[a] - 1, NONE);
                if path.is_empty() {
                    // Nothing a reaches has two fewer, so nothing reachable from a broker
                    // it reaches with at most a's count has either.
                    for b in seen {
                        if state.count[b as usize] <= state.count[a] {
                            stuck[b as usize] = true;
                        }
                    }
                } else {
                    apply(state, &path);
                    progress = true;
                }
            }
        }
    }
}

/// `leader_chains.rack_moves`.
pub fn rack_moves(state: &mut State) {
    if state.rack_size.len() < 2 {
        return;
    }
    while one_rack_move(state) {}
}

fn one_rack_move(state: &mut State) -> bool {
    let mut racks: Vec<u32> = (0..state.rack_size.len() as u32).collect();
    let key = |r: u32| -(state.rack_total[r as usize] as f64) / state.rack_size[r as usize] as f64;
    racks.sort_by(|&x, &y| key(x).partial_cmp(&key(y)).expect("a finite density"));
    for heavy in racks {
        let members: Vec<u32> = (0..state.brokers() as u32)
            .filter(|&b| state.rack[b as usize] == heavy)
            .collect();
        let mut levels: Vec<i64> = members.iter().map(|&b| state.count[b as usize]).collect();
        levels.sort_unstable_by(|x, y| y.cmp(x));
        levels.dedup();
        for level in levels {
            let sources: Vec<u32> = members
                .iter()
                .copied()
                .filter(|&b| state.count[b as usize] == level)
                .collect();
            let (path, _) = shortest_chain(state, &sources, level, heavy);
            if !path.is_empty() {
                apply(state, &path);
                return true;
            }
        }
    }
    false
}

/// `leader_chains._shortest_chain`: BFS over "x leads a partition b could lead" from
/// the sources to the nearest broker with fewer than `below` leaders (and, with a rack
/// `lighter_than`, one that taking a leader from that rack evens out). Returns the
/// hand-offs (partition, new leader) and the brokers seen.
fn shortest_chain(
    state: &State,
    sources: &[u32],
    below: i64,
    lighter_than: u32,
) -> (Vec<(u32, u32)>, Vec<u32>) {
    let target = |b: u32| {
        state.count[b as usize] < below
            && (lighter_than == NONE || state.evens_racks(lighter_than, b))
    };
    let mut parent: Vec<Option<(u32, u32)>> = vec![None; state.brokers()];
    let mut seen_flag = vec![false; state.brokers()];
    let mut seen: Vec<u32> = Vec::new();
    for &s in sources {
        if !seen_flag[s as usize] {
            seen_flag[s as usize] = true;
            seen.push(s);
        }
    }
    if !(0..state.brokers() as u32).any(target) {
        return (Vec::new(), seen); // no target anywhere: spare the full search
    }
    let mut frontier = seen.clone();
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for &x in &frontier {
            for i in state.led.iter(x as usize) {
                for &b in state.cands(i) {
                    if seen_flag[b as usize] {
                        continue;
                    }
                    seen_flag[b as usize] = true;
                    seen.push(b);
                    parent[b as usize] = Some((x, i));
                    if target(b) {
                        let mut path = Vec::new();
                        let mut node = b;
                        while let Some((from, i)) = parent[node as usize] {
                            path.push((i, node));
                            node = from;
                        }
                        path.reverse();
                        return (path, seen);
                    }
                    next.push(b);
                }
            }
        }
        frontier = next;
    }
    (Vec::new(), seen)
}

fn apply(state: &mut State, path: &[(u32, u32)]) {
    // Hand-offs run from the far end back, so no broker ever dips below its count.
    for &(i, to) in path.iter().rev() {
        state.mv(i, to);
    }
}

/// `leader_chains.undo_detours`' bookkeeping: per holder, the partitions it took by
/// origin (origins in order of first use, sets never dropped), per origin its holders.
struct Detours {
    moved_in: Vec<Vec<(u32, usize)>>,
    set_of: HashMap<(u32, u32), usize>,
    sets: Sets,
    holders: Vec<Vec<u32>>,
    moved: Vec<bool>,
}

impl Detours {
    fn track(&mut self, state: &State, i: u32, on: bool) {
        let (o, b) = (state.original[i as usize], state.leader[i as usize]);
        if o == NONE || b == o {
            return;
        }
        let s = match self.set_of.get(&(b, o)) {
            Some(&s) => s,
            None => {
                let s = self.sets.add_set();
                self.set_of.insert((b, o), s);
                self.moved_in[b as usize].push((o, s));
                s
            }
        };
        let holders = &mut self.holders[o as usize];
        if on {
            self.sets.add(s, i);
            if !holders.contains(&b) {
                holders.push(b);
            }
            self.moved[i as usize] = true;
        } else {
            if self.sets.set_of(i) as usize == s {
                self.sets.remove(i);
            }
            if self.sets.is_empty(s) {
                holders.retain(|&h| h != b);
            }
            self.moved[i as usize] = false;
        }
    }

    /// `undo(p)`: the changes that take back p's hand-off, or none.
    fn undo(&self, state: &State, p: u32) -> Vec<(u32, u32)> {
        let (o, x) = (state.original[p as usize], state.leader[p as usize]);
        if state.count[x as usize] == state.count[o as usize] + 1 && state.racks_no_worse(x, o) {
            return vec![(p, o)];
        }
        for &(y, s) in &self.moved_in[o as usize] {
            // o took q from y. The search below does not depend on q: one q stands
            // for them all.
            let Some(q) = self.sets.iter(s).next() else {
                continue;
            };
            if y == x {
                return vec![(p, o), (q, x)]; // a plain swap
            }
            for r in state.led.iter(y as usize) {
                if state.original[r as usize] == y && state.cands(r).contains(&x) {
                    return vec![(p, o), (q, y), (r, x)];
                }
            }
        }
        for &y in &self.holders[x as usize] {
            // y took q from x
            for r in state.led.iter(o as usize) {
                if r != p && state.original[r as usize] == o && state.cands(r).contains(&y) {
                    let s = self.set_of[&(y, x)];
                    let q = self.sets.iter(s).next().expect("y took one from x");
                    return vec![(p, o), (r, y), (q, x)];
                }
            }
        }
        Vec::new()
    }
}

/// `leader_chains.undo_detours`.
pub fn undo_detours(state: &mut State) {
    let (b, n) = (state.brokers(), state.partitions());
    let mut d = Detours {
        moved_in: vec![Vec::new(); b],
        set_of: HashMap::new(),
        sets: Sets::new(0, n),
        holders: vec![Vec::new(); b],
        moved: vec![false; n],
    };
    for i in 0..n as u32 {
        if state.leader[i as usize] != state.original[i as usize] {
            d.track(state, i, true);
        }
    }
    let mut improved = true;
    while improved {
        improved = false;
        let list: Vec<u32> = (0..n as u32).filter(|&i| d.moved[i as usize]).collect();
        for p in list {
            if !d.moved[p as usize] {
                continue;
            }
            let steps = d.undo(state, p);
            if steps.is_empty() {
                continue;
            }
            for (i, to) in steps {
                d.track(state, i, false);
                state.mv(i, to);
                d.track(state, i, true);
            }
            improved = true;
        }
    }
}
