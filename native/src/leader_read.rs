//! `leaders._candidates`: what the leader plan needs of each partition (its candidates
//! as snapshot broker slots, current leader and first replica as ids), read either from
//! the decoded records (`read`) or from the columns read off the JSON (`read_columns`).

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::columns::Columns;
use crate::leaders::{targets, NONE};

pub const ALIVE: u8 = 1;
pub const SUSPECT: u8 = 2;

/// Broker id -> slot, through a table when the ids are small (the usual case).
pub struct Ids {
    dense: Vec<u32>,
    sparse: HashMap<i64, u32>,
}

impl Ids {
    fn new(ids: &[i64]) -> Self {
        let small = ids.iter().all(|&b| (0..1 << 20).contains(&b));
        let top = if small {
            ids.iter().max().map_or(0, |&b| b as usize + 1)
        } else {
            0
        };
        let mut dense = vec![NONE; top];
        let mut sparse = HashMap::new();
        for (k, &b) in ids.iter().enumerate() {
            if small {
                dense[b as usize] = k as u32;
            } else {
                sparse.insert(b, k as u32);
            }
        }
        Ids { dense, sparse }
    }

    pub fn get(&self, b: i64) -> u32 {
        if self.dense.is_empty() {
            return self.sparse.get(&b).copied().unwrap_or(NONE);
        }
        usize::try_from(b)
            .ok()
            .and_then(|b| self.dense.get(b))
            .copied()
            .unwrap_or(NONE)
    }
}

/// What the plan needs of the partitions: candidates (snapshot broker slots), current
/// leader and first replica (ids). None when a figure is past 64 bits or a broker is
/// not in the snapshot (the reference then plans).
pub struct Read {
    pub starts: Vec<u32>,
    pub flat: Vec<u32>,
    pub leader: Vec<i64>,
    pub first: Vec<i64>,
}

pub fn read(
    partitions: &Bound<'_, PyTuple>,
    ids: &Ids,
    flags: &[u8],
    offline_dirs: &[(i64, String)],
) -> PyResult<Option<Read>> {
    let py = partitions.py();
    let (replicas_attr, broker_attr) = (pyo3::intern!(py, "replicas"), pyo3::intern!(py, "broker"));
    let (isr_attr, leader_attr) = (pyo3::intern!(py, "isr"), pyo3::intern!(py, "leader"));
    let dir_attr = pyo3::intern!(py, "log_dir");
    let n = partitions.len();
    let mut out = Read {
        starts: Vec::with_capacity(n + 1),
        flat: Vec::with_capacity(3 * n),
        leader: Vec::with_capacity(n),
        first: Vec::with_capacity(n),
    };
    out.starts.push(0);
    let mut isr: Vec<u32> = Vec::new();
    for p in partitions.iter() {
        let Ok(leader) = p.getattr(leader_attr)?.extract::<i64>() else {
            return Ok(None);
        };
        let replicas = p.getattr(replicas_attr)?;
        let Ok(replicas) = replicas.cast::<PyTuple>() else {
            return Ok(None);
        };
        let in_isr = p.getattr(isr_attr)?;
        let Ok(in_isr) = in_isr.cast::<PyTuple>() else {
            return Ok(None);
        };
        isr.clear();
        let mut sure = true;
        for x in in_isr.iter() {
            let Ok(b) = x.extract::<i64>() else {
                return Ok(None);
            };
            let k = ids.get(b);
            if k == NONE {
                return Ok(None);
            }
            let f = flags[k as usize];
            sure &= f & ALIVE != 0 && f & SUSPECT == 0;
            isr.push(k);
        }
        let mut first = None;
        if sure && isr.len() == replicas.len() {
            // The common case: every replica is in sync on a healthy broker.
            out.flat.extend_from_slice(&isr);
            let r = replicas.get_item(0)?;
            first = r.getattr(broker_attr)?.extract::<i64>().ok();
        } else {
            for r in replicas.iter() {
                let Ok(b) = r.getattr(broker_attr)?.extract::<i64>() else {
                    return Ok(None);
                };
                first.get_or_insert(b);
                let k = ids.get(b);
                if k == NONE {
                    return Ok(None);
                }
                let f = flags[k as usize];
                if f & ALIVE == 0 || !isr.contains(&k) {
                    continue;
                }
                if f & SUSPECT != 0 {
                    let dir = r.getattr(dir_attr)?;
                    if dir.is_none() {
                        continue; // no dir on a broker with an offline dir: offline
                    }
                    let dir = dir.cast_into::<PyString>()?;
                    let dir = dir.to_str()?;
                    if offline_dirs.iter().any(|(ob, od)| *ob == b && od == dir) {
                        continue;
                    }
                }
                out.flat.push(k);
            }
        }
        let Some(first) = first else { return Ok(None) };
        out.first.push(first);
        out.leader.push(leader);
        out.starts.push(out.flat.len() as u32);
    }
    Ok(Some(out))
}

/// Every broker's id (as listed), id -> slot, and each slot's ALIVE and SUSPECT flags;
/// None when `alive` or `suspect` names a broker not listed.
pub fn flags_of(
    brokers: &[(i64, Option<String>)],
    alive: &[i64],
    suspect: &[i64],
) -> Option<(Vec<i64>, Ids, Vec<u8>)> {
    let all: Vec<i64> = brokers.iter().map(|(b, _)| *b).collect();
    let ids = Ids::new(&all);
    let mut flags = vec![0u8; all.len()];
    for (list, flag) in [(alive, ALIVE), (suspect, SUSPECT)] {
        for &b in list.iter() {
            match ids.get(b) {
                NONE => return None,
                k => flags[k as usize] |= flag,
            }
        }
    }
    Some((all, ids, flags))
}

/// `leader_targets` over the columns of `schemas/snapshot_columns.py` (checked there:
/// every replica's broker is listed). None as there for a figure or broker it cannot
/// place.
#[pyfunction]
pub fn leader_targets_columns(
    py: Python<'_>,
    columns: &Bound<'_, Columns>,
    brokers: Vec<(i64, Option<String>)>,
    alive: Vec<i64>,
    suspect: Vec<i64>,
    offline_dirs: Vec<(i64, String)>,
) -> Option<Vec<(usize, i64)>> {
    let (all, ids, flags) = flags_of(&brokers, &alive, &suspect)?;
    let c = columns.get();
    py.detach(|| {
        // (broker, dir index) of the offline dirs some replica names.
        let offline: Vec<(i64, u32)> = offline_dirs
            .iter()
            .filter_map(|(b, path)| Some((*b, c.dir_index(path)?)))
            .collect();
        let found = read_columns(c, &ids, &flags, &offline)?;
        Some(targets(found, &all, &brokers))
    })
}

/// `read` over the columns.
fn read_columns(c: &Columns, ids: &Ids, flags: &[u8], offline: &[(i64, u32)]) -> Option<Read> {
    let n = c.len();
    let mut out = Read {
        starts: Vec::with_capacity(n + 1),
        flat: Vec::with_capacity(3 * n),
        leader: c.leader.clone(),
        first: Vec::with_capacity(n),
    };
    out.starts.push(0);
    let mut isr: Vec<u32> = Vec::new();
    for i in 0..n {
        isr.clear();
        let mut sure = true;
        for &b in c.isr_of(i) {
            let k = ids.get(b);
            if k == NONE {
                return None;
            }
            let f = flags[k as usize];
            sure &= f & ALIVE != 0 && f & SUSPECT == 0;
            isr.push(k);
        }
        let replicas = c.replicas(i);
        out.first.push(c.broker[replicas.start]);
        if sure && isr.len() == replicas.len() {
            // The common case: every replica is in sync on a healthy broker.
            out.flat.extend_from_slice(&isr);
        } else {
            for r in replicas {
                let b = c.broker[r];
                let k = ids.get(b);
                if k == NONE {
                    return None;
                }
                let f = flags[k as usize];
                if f & ALIVE == 0 || !isr.contains(&k) {
                    continue;
                }
                // No dir on a broker with an offline dir counts as offline.
                if f & SUSPECT != 0 && (c.dir[r] == NONE || offline.contains(&(b, c.dir[r]))) {
                    continue;
                }
                out.flat.push(k);
            }
        }
        out.starts.push(out.flat.len() as u32);
    }
    Some(out)
}
