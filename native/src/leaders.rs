//! `core/plan/leaders.py`: the leader plan's state (the candidates are read in
//! `leader_read.rs`, the direct hand-offs are in `leader_direct.rs`, the chains and the
//! last passes in `leader_chains.rs`).
//!
//! Brokers are numbered by rank among the eligible ids (those that can lead some
//! partition, ascending), so every order the reference takes from its dicts (sorted
//! ids, racks by first broker) is the order of these numbers. The reference's ordered
//! sets are dicts: kept here as insertion-ordered lists (`Sets`).

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::leader_chains::{chain_moves, rack_moves, undo_detours};
use crate::leader_direct::direct_pass;
use crate::leader_read::{flags_of, read, Read};

pub const NONE: u32 = u32::MAX;

/// Ordered sets of partitions, each partition in at most one set at a time, iterated in
/// insertion order as a Python dict's keys (a removed key added again goes last).
pub struct Sets {
    items: Vec<Vec<u32>>,
    dead: Vec<usize>,
    place: Vec<(u32, u32)>,
}

impl Sets {
    pub fn new(sets: usize, partitions: usize) -> Self {
        Sets {
            items: vec![Vec::new(); sets],
            dead: vec![0; sets],
            place: vec![(NONE, NONE); partitions],
        }
    }

    pub fn add_set(&mut self) -> usize {
        self.items.push(Vec::new());
        self.dead.push(0);
        self.items.len() - 1
    }

    pub fn add(&mut self, s: usize, i: u32) {
        let v = &mut self.items[s];
        self.place[i as usize] = (s as u32, v.len() as u32);
        v.push(i);
    }

    pub fn set_of(&self, i: u32) -> u32 {
        self.place[i as usize].0
    }

    pub fn remove(&mut self, i: u32) {
        let (s, k) = self.place[i as usize];
        if s == NONE {
            return;
        }
        let s = s as usize;
        self.items[s][k as usize] = NONE;
        self.place[i as usize] = (NONE, NONE);
        self.dead[s] += 1;
        if self.dead[s] > 16 && 2 * self.dead[s] > self.items[s].len() {
            let v = &mut self.items[s];
            v.retain(|&x| x != NONE);
            for (k, &x) in v.iter().enumerate() {
                self.place[x as usize] = (s as u32, k as u32);
            }
            self.dead[s] = 0;
        }
    }

    pub fn iter(&self, s: usize) -> impl Iterator<Item = u32> + '_ {
        self.items[s].iter().copied().filter(|&x| x != NONE)
    }

    pub fn is_empty(&self, s: usize) -> bool {
        self.items[s].len() == self.dead[s]
    }
}

/// `leaders.Leadership`.
pub struct State {
    starts: Vec<u32>,
    flat: Vec<u32>,
    pub leader: Vec<u32>,
    pub original: Vec<u32>,
    pub led: Sets,
    pub count: Vec<i64>,
    pub rack: Vec<u32>,
    pub rack_size: Vec<i64>,
    pub rack_total: Vec<i64>,
    rack_density: Vec<f64>,
    /// Broker id by rank.
    pub ids: Vec<i64>,
}

impl State {
    pub fn brokers(&self) -> usize {
        self.count.len()
    }

    pub fn partitions(&self) -> usize {
        self.leader.len()
    }

    pub fn cands(&self, i: u32) -> &[u32] {
        let i = i as usize;
        &self.flat[self.starts[i] as usize..self.starts[i + 1] as usize]
    }

    pub fn density(&self, b: u32) -> f64 {
        match self.rack[b as usize] {
            NONE => 0.0,
            r => self.rack_density[r as usize],
        }
    }

    fn rack_add(&mut self, b: u32, delta: i64) {
        let r = self.rack[b as usize];
        if r != NONE {
            let r = r as usize;
            self.rack_total[r] += delta;
            self.rack_density[r] = self.rack_total[r] as f64 / self.rack_size[r] as f64;
        }
    }

    pub fn mv(&mut self, i: u32, to: u32) {
        let old = self.leader[i as usize];
        if old != NONE {
            self.count[old as usize] -= 1;
            self.led.remove(i);
            self.rack_add(old, -1);
        }
        self.leader[i as usize] = to;
        self.count[to as usize] += 1;
        self.led.add(to as usize, i);
        self.rack_add(to, 1);
    }

    /// `Leadership.evens_racks`.
    pub fn evens_racks(&self, heavy: u32, broker: u32) -> bool {
        let r = self.rack[broker as usize];
        if r == NONE || r == heavy {
            return false;
        }
        let (t, s) = (&self.rack_total, &self.rack_size);
        let (r, h) = (r as usize, heavy as usize);
        (2 * t[r] + 1) * s[h] < (2 * t[h] - 1) * s[r]
    }

    /// `Leadership.racks_no_worse`.
    pub fn racks_no_worse(&self, source: u32, target: u32) -> bool {
        let (a, b) = (self.rack[source as usize], self.rack[target as usize]);
        if a == b || a == NONE || b == NONE {
            return a == b;
        }
        let (t, s) = (&self.rack_total, &self.rack_size);
        let (a, b) = (a as usize, b as usize);
        (2 * t[b] + 1) * s[a] <= (2 * t[a] - 1) * s[b]
    }
}

/// `leaders.plan_leaders` up to the targets: `brokers` lists every broker of the
/// snapshot as (id, rack), `alive` and `suspect` (with an offline dir) name some of
/// them. Returns (partition index, target id) of each partition whose preferred or
/// current leader the plan changes, in partition order; None when a figure does not
/// fit in 64 bits or a partition names a broker not listed (the reference then plans).
#[pyfunction]
pub fn leader_targets(
    partitions: &Bound<'_, PyTuple>,
    brokers: Vec<(i64, Option<String>)>,
    alive: Vec<i64>,
    suspect: Vec<i64>,
    offline_dirs: Vec<(i64, String)>,
) -> PyResult<Option<Vec<(usize, i64)>>> {
    let Some((all, ids, flags)) = flags_of(&brokers, &alive, &suspect) else {
        return Ok(None);
    };
    let Some(found) = read(partitions, &ids, &flags, &offline_dirs)? else {
        return Ok(None);
    };
    Ok(Some(targets(found, &all, &brokers)))
}

/// The plan from the partitions' candidates: (index, target id) of each partition
/// whose preferred or current leader changes.
pub fn targets(found: Read, all: &[i64], brokers: &[(i64, Option<String>)]) -> Vec<(usize, i64)> {
    let mut state = start(found.starts, found.flat, &found.leader, all, brokers);
    plan(&mut state);
    let eligible = &state.ids;
    let mut out = Vec::new();
    for (i, &t) in state.leader.iter().enumerate() {
        if t == NONE {
            continue;
        }
        let id = eligible[t as usize];
        if found.first[i] != id || found.leader[i] != id {
            out.push((i, id));
        }
    }
    out
}

/// `Leadership.__init__`: ranks the eligible brokers, numbers their racks in order of
/// first broker, and starts from the current leaders that are candidates.
fn start(
    starts: Vec<u32>,
    mut flat: Vec<u32>,
    leaders: &[i64],
    all: &[i64],
    brokers: &[(i64, Option<String>)],
) -> State {
    let mut rank = vec![NONE; all.len()];
    for &k in &flat {
        rank[k as usize] = 0;
    }
    let mut slots: Vec<u32> = (0..all.len() as u32)
        .filter(|&k| rank[k as usize] == 0)
        .collect();
    slots.sort_by_key(|&k| all[k as usize]);
    for (r, &k) in slots.iter().enumerate() {
        rank[k as usize] = r as u32;
    }
    for k in flat.iter_mut() {
        *k = rank[*k as usize];
    }
    let b = slots.len();
    let mut rack = vec![NONE; b];
    let mut names: Vec<&str> = Vec::new();
    for (r, &k) in slots.iter().enumerate() {
        if let Some(name) = brokers[k as usize].1.as_deref() {
            let at = names.iter().position(|&x| x == name).unwrap_or_else(|| {
                names.push(name);
                names.len() - 1
            });
            rack[r] = at as u32;
        }
    }
    let n = leaders.len();
    let mut state = State {
        starts,
        flat,
        leader: vec![NONE; n],
        original: vec![NONE; n],
        led: Sets::new(b, n),
        count: vec![0; b],
        rack,
        rack_size: vec![0; names.len()],
        rack_total: vec![0; names.len()],
        rack_density: vec![0.0; names.len()],
        ids: slots.iter().map(|&k| all[k as usize]).collect(),
    };
    for r in 0..b {
        if state.rack[r] != NONE {
            state.rack_size[state.rack[r] as usize] += 1;
        }
    }
    for i in 0..n as u32 {
        let id = leaders[i as usize];
        if let Some(&k) = state
            .cands(i)
            .iter()
            .find(|&&k| state.ids[k as usize] == id)
        {
            state.leader[i as usize] = k;
            state.original[i as usize] = k;
            state.count[k as usize] += 1;
            state.led.add(k as usize, i);
            if state.rack[k as usize] != NONE {
                state.rack_total[state.rack[k as usize] as usize] += 1;
            }
        }
    }
    for r in 0..names.len() {
        state.rack_density[r] = state.rack_total[r] as f64 / state.rack_size[r] as f64;
    }
    state
}

/// `plan_leaders` before the plan is written out.
fn plan(state: &mut State) {
    for i in 0..state.partitions() as u32 {
        if state.leader[i as usize] != NONE || state.cands(i).is_empty() {
            continue;
        }
        // The orphans: the least loaded candidate, then the lighter rack, then the first.
        let mut best = NONE;
        for &b in state.cands(i) {
            let better = best == NONE || {
                let (cb, cx) = (state.count[best as usize], state.count[b as usize]);
                cx < cb || (cx == cb && state.density(b) < state.density(best))
            };
            if better {
                best = b;
            }
        }
        state.mv(i, best);
    }
    if state.brokers() == 0 {
        return;
    }
    let total: i64 = state.count.iter().sum();
    let (floor, extra) = (
        total / state.brokers() as i64,
        total % state.brokers() as i64,
    );
    let ceiling = floor + i64::from(extra != 0);
    direct_pass(state, Some(ceiling), Some(floor));
    direct_pass(state, Some(ceiling), None);
    direct_pass(state, None, Some(floor));
    chain_moves(state);
    rack_moves(state);
    undo_detours(state);
}
