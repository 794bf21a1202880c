//! `leaders.plan_json`: the leader plan's JSON text written straight from the columns
//! and the targets, the bytes `json.dumps(plan.to_json(), check_circular=False)` gives
//! for the plan `leaders._write_out` makes of the same targets (default separators
//! ", " and ": ", keys in the records' order, ints in decimal, `ensure_ascii`).
//!
//! The only strings it writes are topic names and "any". It refuses (None: Python
//! writes the plan) a topic with any byte json.dumps would escape (outside printable
//! ASCII, a quote, a backslash), and a target naming no partition
//! or one with no replicas.

use std::fmt::Write;

use pyo3::prelude::*;

use crate::columns::Columns;

/// Plain: a topic name json.dumps writes as it is (its `ESCAPE_ASCII` finds nothing).
pub fn plain(topic: &str) -> bool {
    topic
        .bytes()
        .all(|c| (b' '..=b'~').contains(&c) && c != b'"' && c != b'\\')
}

/// The plan's JSON text for (partition index, target leader) pairs, as the reference
/// writes the plan out of them: a reorder where the first replica is not the target
/// (target first, then the rest in their order; every dir "any"), an election where
/// the current leader is not; a negative target is skipped. None as above.
#[pyfunction]
pub fn leader_plan_json(
    py: Python<'_>,
    columns: &Bound<'_, Columns>,
    targets: Vec<(usize, i64)>,
) -> Option<String> {
    let c = columns.get();
    py.detach(|| write(c, &targets))
}

fn write(c: &Columns, targets: &[(usize, i64)]) -> Option<String> {
    // Each topic checked once, when first named: 0 not yet, 1 plain, 2 not.
    let mut checked = vec![0u8; c.topics.len()];
    let mut reorders = String::with_capacity(targets.len() * 96);
    let mut election = String::with_capacity(targets.len() * 40);
    for &(i, target) in targets {
        if i >= c.len() {
            return None;
        }
        if target < 0 {
            continue;
        }
        let t = c.topic[i] as usize;
        if checked[t] == 0 {
            checked[t] = if plain(&c.topics[t]) { 1 } else { 2 };
        }
        if checked[t] == 2 {
            return None;
        }
        let (topic, number) = (&c.topics[t], c.number[i]);
        let brokers = &c.broker[c.replicas(i)];
        let Some(&first) = brokers.first() else {
            return None;
        };
        if first != target {
            if !reorders.is_empty() {
                reorders.push_str(", ");
            }
            let _ = write!(
                reorders,
                "{{\"topic\": \"{topic}\", \"partition\": {number}, \"replicas\": [{target}"
            );
            let mut listed = 1;
            for &b in brokers.iter().filter(|&&b| b != target) {
                let _ = write!(reorders, ", {b}");
                listed += 1;
            }
            reorders.push_str("], \"log_dirs\": [\"any\"");
            for _ in 1..listed {
                reorders.push_str(", \"any\"");
            }
            reorders.push_str("]}");
        }
        if c.leader[i] != target {
            if !election.is_empty() {
                election.push_str(", ");
            }
            let _ = write!(
                election,
                "{{\"topic\": \"{topic}\", \"partition\": {number}}}"
            );
        }
    }
    let mut out = String::with_capacity(reorders.len() + election.len() + 96);
    out.push_str("{\"reassignment\": {\"version\": 1, \"partitions\": [");
    out.push_str(&reorders);
    out.push_str("]}, \"election\": {\"partitions\": [");
    out.push_str(&election);
    out.push_str("]}}");
    Some(out)
}
