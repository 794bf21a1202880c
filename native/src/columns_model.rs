//! `core/model.py`'s passes over every replica (`model.rs`), over the columns of
//! `columns.rs` instead of the decoded records: the same answers, or None where the
//! records' version gives None.

use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::columns::Columns;
use crate::scan::{FnvMap, NONE};

/// `model::broker_totals` over the columns.
pub fn broker_totals(
    c: &Columns,
    ids: &[i64],
    alive: &[i64],
    with_offline_dir: &[i64],
    offline_dirs: &[(i64, String)],
) -> Option<(Vec<i64>, Vec<i64>, Vec<usize>)> {
    let place: FnvMap<i64, usize> = ids.iter().enumerate().map(|(k, &b)| (b, k)).collect();
    let mut counts = vec![0i64; ids.len()];
    let mut sizes = vec![0i64; ids.len()];
    let down: Vec<bool> = ids.iter().map(|b| !alive.contains(b)).collect();
    let flawed: Vec<bool> = ids.iter().map(|b| with_offline_dir.contains(b)).collect();
    // (broker, dir index) of the offline dirs some replica names.
    let offline: Vec<(i64, u32)> = offline_dirs
        .iter()
        .filter_map(|(b, path)| Some((*b, c.dir_index(path)?)))
        .collect();
    let mut found: Vec<usize> = Vec::new();
    for i in 0..c.len() {
        for r in c.replicas(i) {
            let b = c.broker[r];
            let k = *place.get(&b)?;
            counts[k] += 1;
            sizes[k] = sizes[k].checked_add(c.size[r])?;
            let d = c.dir[r];
            let gone = down[k] || (flawed[k] && (d == NONE || offline.contains(&(b, d))));
            if gone && found.last() != Some(&i) {
                found.push(i);
            }
        }
    }
    Some((counts, sizes, found))
}

/// Per slot, the replicas' sizes and their partitions' indexes.
pub type DirLists = Vec<(Py<PyList>, Py<PyList>)>;

/// `model::dir_index` over the columns: `slots` lists (broker, dir path or None); per
/// slot the replicas' sizes and partition indexes, in partition order. None when a
/// replica is on a slot not listed.
pub fn dir_index(
    py: Python<'_>,
    c: &Columns,
    slots: &[(i64, Option<String>)],
) -> PyResult<Option<DirLists>> {
    // Slot by (broker, dir index + 1), 0 for no dir; a path no replica names is no key.
    let mut by: FnvMap<(i64, u32), usize> = FnvMap::default();
    for (k, (b, path)) in slots.iter().enumerate() {
        match path {
            None => by.insert((*b, 0), k),
            Some(p) => match c.dir_index(p) {
                Some(d) => by.insert((*b, d + 1), k),
                None => continue,
            },
        };
    }
    // One int object per partition index, and per size where a partition's replicas
    // repeat it (they mostly do), shared by the lists as the records' version shares them.
    let mut sizes: Vec<Vec<Bound<'_, PyAny>>> = (0..slots.len()).map(|_| Vec::new()).collect();
    let mut parts: Vec<Vec<Bound<'_, PyAny>>> = (0..slots.len()).map(|_| Vec::new()).collect();
    for i in 0..c.len() {
        let index = i.into_pyobject(py)?.into_any();
        let mut last: Option<(i64, Bound<'_, PyAny>)> = None;
        for r in c.replicas(i) {
            let d = c.dir[r];
            let key = (c.broker[r], if d == NONE { 0 } else { d + 1 });
            let Some(&k) = by.get(&key) else { return Ok(None) };
            let size = match &last {
                Some((v, obj)) if *v == c.size[r] => obj.clone(),
                _ => {
                    let obj = c.size[r].into_pyobject(py)?.into_any();
                    last = Some((c.size[r], obj.clone()));
                    obj
                }
            };
            sizes[k].push(size);
            parts[k].push(index.clone());
        }
    }
    let mut out = Vec::with_capacity(slots.len());
    for (s, p) in sizes.into_iter().zip(parts) {
        out.push((PyList::new(py, s)?.unbind(), PyList::new(py, p)?.unbind()));
    }
    Ok(Some(out))
}
