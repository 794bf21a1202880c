//! `plan disks` over the columns (`disks.plan_json`, `disks.plan_disks`): which brokers
//! to balance, their dirs' limits and order, the moves (drained as `disks._balance`
//! drains them) and the plan's reassignment as JSON text, the bytes `json.dumps` gives
//! for the reference's records (as `leader_json.rs` does for leaders), with no per-dir
//! index or record made in Python. Python lists the brokers that can move (alive, no
//! offline dir) and words the skipped brokers' reasons.
//!
//! The floats are the reference's, operation for operation: a dir's capacity its
//! `total_bytes` as a float (1.0 for every dir of a broker where one has none), the
//! mean ratio the int sum of bytes over the float sum of capacities, each limit
//! `threshold * mean * capacity`, a cordoned dir's limit its own bytes where those are
//! less. It refuses (None: the reference plans) a capacity past 2^50 (sums of
//! capacities then stay exact however Python adds them), a sum past 64 bits, a
//! negative size and a NaN among a broker's limits.

use std::fmt::Write;

use pyo3::prelude::*;

use crate::columns::Columns;
use crate::disks::{drain, int_lt_float, over};
use crate::leader_json::plain;
use crate::scan::{FnvMap, NONE};

/// One broker that can move: its id and its online dirs (path, `total_bytes`,
/// cordoned), in the model's order.
type Broker = (i64, Vec<(String, Option<i64>, bool)>);
/// One move: (partition index, broker's place in the list, source dir, target dir, bytes).
type Move = (usize, usize, usize, usize, i64);
/// A broker still over the threshold after its moves: its place and its dirs' bytes.
type Unreachable = (usize, Vec<i64>);

/// The brokers still over the threshold after their moves, and the plan: as the
/// reassignment's JSON text when `text` is asked and every name in it is plain, else
/// as the moves. None as above.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn disk_plan(
    py: Python<'_>,
    columns: &Bound<'_, Columns>,
    brokers: Vec<Broker>,
    threshold: f64,
    tolerance: f64,
    text: bool,
) -> Option<(Vec<Unreachable>, Option<String>, Option<Vec<Move>>)> {
    let c = columns.get();
    py.detach(|| {
        let (moves, late) = plan(c, &brokers, threshold, tolerance)?;
        match if text {
            write(c, &brokers, &moves)
        } else {
            None
        } {
            Some(json) => Some((late, Some(json), None)),
            None => Some((late, None, Some(moves))),
        }
    })
}

/// A broker to balance: its place, its dirs' capacities, bytes and limits, the mean
/// ratio, and its dirs in the order `_balance` takes them as sources (by room).
struct Job {
    broker: usize,
    capacity: Vec<f64>,
    used: Vec<i64>,
    limits: Vec<f64>,
    mean: f64,
    order: Vec<usize>,
}

impl Job {
    /// `disks._over`: some dir above `threshold` x the mean ratio x its capacity.
    fn over(&self, threshold: f64, tolerance: f64) -> bool {
        let limit = threshold * self.mean;
        (0..self.used.len()).any(|d| over(self.used[d], limit * self.capacity[d], tolerance))
    }
}

const MAX_CAPACITY: i64 = 1 << 50;

/// The broker's job when it has dirs to balance; Some(None) when it has none.
fn job(
    place: usize,
    dirs: &[(String, Option<i64>, bool)],
    used: Vec<i64>,
    threshold: f64,
    tolerance: f64,
) -> Option<Option<Job>> {
    if dirs.len() < 2 {
        return Some(None);
    }
    let by_bytes = dirs.iter().any(|d| d.1.unwrap_or(0) == 0);
    let mut capacity = Vec::with_capacity(dirs.len());
    for (_, total, _) in dirs {
        let t = total.unwrap_or(0);
        if !(0..=MAX_CAPACITY).contains(&t) {
            return None;
        }
        capacity.push(if by_bytes { 1.0 } else { t as f64 });
    }
    let total = used.iter().try_fold(0i64, |a, &u| a.checked_add(u))?;
    let mean = total as f64 / capacity.iter().sum::<f64>();
    let mut job = Job {
        broker: place,
        capacity,
        used,
        limits: Vec::new(),
        mean,
        order: Vec::new(),
    };
    if !job.over(threshold, tolerance) {
        return Some(None);
    }
    let limit = threshold * mean;
    for (d, (_, _, cordoned)) in dirs.iter().enumerate() {
        let l = limit * job.capacity[d];
        let u = job.used[d];
        // min(limit, used): the bytes where they are less (exactly, as Python compares).
        job.limits.push(if *cordoned && int_lt_float(u, l) {
            u as f64
        } else {
            l
        });
    }
    let room: Vec<f64> = (0..dirs.len())
        .map(|d| job.limits[d] - job.used[d] as f64)
        .collect();
    if room.iter().any(|r| r.is_nan()) {
        return None;
    }
    job.order = (0..dirs.len()).collect();
    // Stable, as sorted(); no NaN here, and -0.0 equals 0.0 as in Python.
    job.order.sort_by(|&a, &b| {
        room[a]
            .partial_cmp(&room[b])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    Some(Some(job))
}

/// Slot numbers by (broker id, dir name's index in the columns): a table for small ids
/// (the usual case), else a hash.
struct Slots {
    map: FnvMap<(i64, u32), usize>,
    table: Vec<u32>,
    dirs: usize,
}

impl Slots {
    fn new(c: &Columns, keys: impl Iterator<Item = (i64, String)>) -> Self {
        let mut map = FnvMap::default();
        for (k, (b, path)) in keys.enumerate() {
            if let Some(d) = c.dir_index(&path) {
                map.insert((b, d), k);
            }
        }
        let dirs = c.dir_names.len();
        let top = map.keys().map(|&(b, _)| b).max().unwrap_or(-1);
        let mut table = Vec::new();
        if map.keys().all(|&(b, _)| b >= 0) && (top + 1) as usize * dirs <= 1 << 22 {
            table = vec![u32::MAX; (top + 1) as usize * dirs];
            for (&(b, d), &k) in &map {
                table[b as usize * dirs + d as usize] = k as u32;
            }
            map.clear();
        }
        Slots { map, table, dirs }
    }

    /// f(slot, replica, partition) for each replica on a slot, in partition order.
    fn each(
        &self,
        c: &Columns,
        mut f: impl FnMut(usize, usize, usize) -> Option<()>,
    ) -> Option<()> {
        if self.map.is_empty() && self.table.is_empty() {
            return Some(());
        }
        for i in 0..c.len() {
            for r in c.replicas(i) {
                let d = c.dir[r];
                if d == NONE {
                    continue;
                }
                let found = if self.table.is_empty() {
                    self.map.get(&(c.broker[r], d)).copied()
                } else {
                    usize::try_from(c.broker[r])
                        .ok()
                        .and_then(|b| self.table.get(b * self.dirs + d as usize))
                        .filter(|&&k| k != u32::MAX)
                        .map(|&k| k as usize)
                };
                if let Some(k) = found {
                    f(k, r, i)?;
                }
            }
        }
        Some(())
    }
}

/// The moves of every broker to balance, in the reference's order, and the brokers
/// still over the threshold after them.
fn plan(
    c: &Columns,
    brokers: &[Broker],
    threshold: f64,
    tolerance: f64,
) -> Option<(Vec<Move>, Vec<Unreachable>)> {
    // Bytes per dir of every broker that can move: one pass.
    let mut base = Vec::with_capacity(brokers.len() + 1);
    base.push(0);
    for (_, dirs) in brokers {
        base.push(base.last().unwrap() + dirs.len());
    }
    let keys = brokers
        .iter()
        .flat_map(|(b, dirs)| dirs.iter().map(|d| (*b, d.0.clone())));
    let mut sums = vec![0i64; base[brokers.len()]];
    Slots::new(c, keys).each(c, |k, r, _| {
        sums[k] = sums[k].checked_add(c.size[r])?;
        Some(())
    })?;
    let mut jobs = Vec::new();
    for (k, (_, dirs)) in brokers.iter().enumerate() {
        let used = sums[base[k]..base[k + 1]].to_vec();
        if let Some(j) = job(k, dirs, used, threshold, tolerance)? {
            jobs.push(j);
        }
    }
    // A bucket for each dir over its limit from the start: only those are drained (a
    // target takes only what fits under its limit, so no dir goes over later).
    let mut bucket_keys = Vec::new();
    let mut bucket = Vec::with_capacity(jobs.len()); // job -> dir -> bucket
    for job in &jobs {
        let mut mine = vec![usize::MAX; job.used.len()];
        for (d, place) in mine.iter_mut().enumerate() {
            if over(job.used[d], job.limits[d], tolerance) {
                *place = bucket_keys.len();
                bucket_keys.push((brokers[job.broker].0, brokers[job.broker].1[d].0.clone()));
            }
        }
        bucket.push(mine);
    }
    // Per bucket, (size, partition index): sorted, the reference's packed keys' order.
    let mut buckets: Vec<Vec<(i64, usize)>> = vec![Vec::new(); bucket_keys.len()];
    Slots::new(c, bucket_keys.into_iter()).each(c, |k, r, i| {
        (c.size[r] >= 0).then(|| buckets[k].push((c.size[r], i)))
    })?;
    let mut moves = Vec::new();
    let mut late = Vec::new();
    for (j, job) in jobs.iter_mut().enumerate() {
        for &s in &job.order {
            if !over(job.used[s], job.limits[s], tolerance) {
                break; // by room: the rest are within their limits
            }
            let k = bucket[j][s];
            if k == usize::MAX {
                return None; // over now but not at the start: not the reference's state
            }
            let keys = &mut buckets[k];
            keys.sort_unstable();
            for (i, t, size) in drain(keys, s, &mut job.used, &job.limits, tolerance)? {
                moves.push((i, job.broker, s, t, size));
            }
        }
        if job.over(threshold, tolerance) {
            late.push((job.broker, job.used.clone()));
        }
    }
    Some((moves, late))
}

/// `{"version": 1, "partitions": [...]` of the reference's reassignment (the caller
/// adds the skipped brokers and the closing brace): one entry per moved partition, by
/// index, its replicas unchanged, each moved replica's new dir, "any" for the rest.
/// None for a topic or dir json.dumps would escape.
fn write(c: &Columns, brokers: &[Broker], moves: &[Move]) -> Option<String> {
    let mut by_partition: Vec<(usize, i64, usize, usize)> = moves
        .iter()
        .map(|&(i, j, _, t, _)| (i, brokers[j].0, j, t))
        .collect();
    by_partition.sort_by_key(|m| m.0); // stable: one move per (partition, broker)
    let mut out = String::with_capacity(by_partition.len() * 128 + 64);
    out.push_str("{\"version\": 1, \"partitions\": [");
    let mut checked = vec![0u8; c.topics.len()]; // 0 not yet, 1 plain, 2 not
    let (mut k, mut first) = (0, true);
    while k < by_partition.len() {
        let i = by_partition[k].0;
        let end = k + by_partition[k..].iter().take_while(|m| m.0 == i).count();
        let group = &by_partition[k..end];
        k = end;
        let t = c.topic[i] as usize;
        if checked[t] == 0 {
            checked[t] = if plain(&c.topics[t]) { 1 } else { 2 };
        }
        if checked[t] == 2 {
            return None;
        }
        if !first {
            out.push_str(", ");
        }
        first = false;
        let replicas = &c.broker[c.replicas(i)];
        let _ = write!(
            out,
            "{{\"topic\": \"{}\", \"partition\": {}, \"replicas\": [",
            c.topics[t], c.number[i]
        );
        for (n, b) in replicas.iter().enumerate() {
            let _ = write!(out, "{}{b}", if n > 0 { ", " } else { "" });
        }
        out.push_str("], \"log_dirs\": [");
        for (n, b) in replicas.iter().enumerate() {
            out.push_str(if n > 0 { ", \"" } else { "\"" });
            match group.iter().rev().find(|m| m.1 == *b) {
                Some(&(_, _, j, target)) => {
                    let path = &brokers[j].1[target].0;
                    if !plain(path) {
                        return None;
                    }
                    out.push_str(path);
                }
                None => out.push_str("any"),
            }
            out.push('"');
        }
        out.push_str("]}");
    }
    out.push(']');
    Some(out)
}

/// `model.dir_bytes` over the columns, without the per-dir index: the bytes of the
/// replicas on each of `slots` (broker, dir path). None when a sum leaves 64 bits.
#[pyfunction]
pub fn dir_sums(
    py: Python<'_>,
    columns: &Bound<'_, Columns>,
    slots: Vec<(i64, String)>,
) -> Option<Vec<i64>> {
    let c = columns.get();
    py.detach(|| {
        let mut sums = vec![0i64; slots.len()];
        let found = Slots::new(c, slots.into_iter()).each(c, |k, r, _| {
            sums[k] = sums[k].checked_add(c.size[r])?;
            Some(())
        });
        found.map(|_| sums)
    })
}
