//! `plan disks` over the columns (`disks.plan_json`, `disks.plan_disks`): the moves of
//! every broker to balance, drained as `disks._balance` drains them, with no per-dir
//! index made in Python; and the plan's reassignment as JSON text, the bytes
//! `json.dumps` gives for the reference's records (as `leader_json.rs` does for
//! leaders). Python still decides which brokers to balance, their limits and the order
//! of their dirs (a few hundred floats), and writes the skipped brokers' reasons.

use std::fmt::Write;

use pyo3::prelude::*;

use crate::columns::Columns;
use crate::disks::{drain, over};
use crate::leader_json::plain;
use crate::scan::{FnvMap, NONE};

/// One broker to balance: its id, its online dirs' paths, bytes and limits (in the
/// reference's order of `broker_usage`), and its dirs as `_balance` takes them as
/// sources (by room, least first).
type Job = (i64, Vec<String>, Vec<i64>, Vec<f64>, Vec<usize>);
/// One move: (partition index, job, source dir, target dir, bytes).
type Move = (usize, usize, usize, usize, i64);

/// Every job's dirs' bytes after its moves, and the plan: as the reassignment's JSON
/// text when `text` is asked and every name in it is plain, else as the moves. None
/// when a figure leaves 64 bits or a size is negative (the reference runs).
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn disk_moves(
    py: Python<'_>,
    columns: &Bound<'_, Columns>,
    jobs: Vec<Job>,
    tolerance: f64,
    text: bool,
) -> Option<(Vec<Vec<i64>>, Option<String>, Option<Vec<Move>>)> {
    let c = columns.get();
    py.detach(|| {
        let (moves, used) = plan(c, &jobs, tolerance)?;
        match if text { write(c, &jobs, &moves) } else { None } {
            Some(json) => Some((used, Some(json), None)),
            None => Some((used, None, Some(moves))),
        }
    })
}

/// The moves of every job, in the reference's order, and the bytes after them.
fn plan(c: &Columns, jobs: &[Job], tolerance: f64) -> Option<(Vec<Move>, Vec<Vec<i64>>)> {
    let mut used: Vec<Vec<i64>> = jobs.iter().map(|j| j.2.clone()).collect();
    // A bucket for each dir over its limit from the start: only those are drained (a
    // target takes only what fits under its limit, so no dir goes over later).
    let mut bucket_of: FnvMap<(i64, u32), usize> = FnvMap::default();
    let mut place: Vec<Vec<usize>> = Vec::with_capacity(jobs.len()); // job, dir -> bucket
    let mut count = 0;
    for (broker, paths, bytes, limits, _) in jobs {
        if paths.len() != limits.len() || bytes.len() != limits.len() {
            return None;
        }
        let mut mine = vec![usize::MAX; paths.len()];
        for (d, path) in paths.iter().enumerate() {
            if over(bytes[d], limits[d], tolerance) {
                mine[d] = count;
                if let Some(k) = c.dir_index(path) {
                    bucket_of.insert((*broker, k), count);
                }
                count += 1;
            }
        }
        place.push(mine);
    }
    // Per bucket, (size, partition index): sorted, the reference's packed keys' order.
    let mut buckets: Vec<Vec<(i64, usize)>> = vec![Vec::new(); count];
    if !bucket_of.is_empty() {
        for i in 0..c.len() {
            for r in c.replicas(i) {
                let d = c.dir[r];
                if d == NONE {
                    continue;
                }
                if let Some(&k) = bucket_of.get(&(c.broker[r], d)) {
                    if c.size[r] < 0 {
                        return None;
                    }
                    buckets[k].push((c.size[r], i));
                }
            }
        }
    }
    let mut moves = Vec::new();
    for (j, (_, _, _, limits, order)) in jobs.iter().enumerate() {
        for &s in order {
            if s >= limits.len() {
                return None;
            }
            if !over(used[j][s], limits[s], tolerance) {
                break; // by room: the rest are within their limits
            }
            let k = place[j][s];
            if k == usize::MAX {
                return None; // over now but not at the start: not the reference's state
            }
            let keys = &mut buckets[k];
            keys.sort_unstable();
            for (i, t, size) in drain(keys, s, &mut used[j], limits, tolerance)? {
                moves.push((i, j, s, t, size));
            }
        }
    }
    Some((moves, used))
}

/// `{"version": 1, "partitions": [...]` of the reference's reassignment (the caller
/// adds the skipped brokers and the closing brace): one entry per moved partition, by
/// index, its replicas unchanged, each moved replica's new dir, "any" for the rest.
/// None for a topic or dir json.dumps would escape.
fn write(c: &Columns, jobs: &[Job], moves: &[Move]) -> Option<String> {
    let mut by_partition: Vec<(usize, i64, usize, usize)> = moves
        .iter()
        .map(|&(i, j, _, t, _)| (i, jobs[j].0, j, t))
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
        let brokers = &c.broker[c.replicas(i)];
        let _ = write!(
            out,
            "{{\"topic\": \"{}\", \"partition\": {}, \"replicas\": [",
            c.topics[t], c.number[i]
        );
        for (n, b) in brokers.iter().enumerate() {
            let _ = write!(out, "{}{b}", if n > 0 { ", " } else { "" });
        }
        out.push_str("], \"log_dirs\": [");
        for (n, b) in brokers.iter().enumerate() {
            out.push_str(if n > 0 { ", \"" } else { "\"" });
            match group.iter().rev().find(|m| m.1 == *b) {
                Some(&(_, _, j, target)) => {
                    let path = &jobs[j].1[target];
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
/// replicas on each of `slots` (broker, dir path). None when a replica names a dir not
/// listed or a sum leaves 64 bits.
#[pyfunction]
pub fn dir_sums(
    py: Python<'_>,
    columns: &Bound<'_, Columns>,
    slots: Vec<(i64, String)>,
) -> Option<Vec<i64>> {
    let c = columns.get();
    py.detach(|| {
        let mut slot_of: FnvMap<(i64, u32), usize> = FnvMap::default();
        for (k, (b, path)) in slots.iter().enumerate() {
            if let Some(d) = c.dir_index(path) {
                slot_of.insert((*b, d), k);
            }
        }
        let mut sums = vec![0i64; slots.len()];
        for r in 0..c.broker.len() {
            let d = c.dir[r];
            if d != NONE {
                let k = *slot_of.get(&(c.broker[r], d))?;
                sums[k] = sums[k].checked_add(c.size[r])?;
            }
        }
        Some(sums)
    })
}
