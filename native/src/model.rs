//! `core/model.py`: the passes over every replica that build the model's indexes.
//! They read the decoded records (msgspec Structs) in place: attributes by interned
//! name, brokers and dirs matched in Rust rather than through Python dicts.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

/// One replica's (broker, dir or None, size); None when the size is not an i64.
struct Fields<'py> {
    broker: i64,
    dir: Option<Bound<'py, PyString>>,
    size: Option<i64>,
}

fn each_replica<'py>(
    partitions: &Bound<'py, PyTuple>,
    mut f: impl FnMut(usize, Fields<'py>) -> Option<()>,
) -> PyResult<Option<()>> {
    let py = partitions.py();
    let replicas_attr = pyo3::intern!(py, "replicas");
    let broker_attr = pyo3::intern!(py, "broker");
    let dir_attr = pyo3::intern!(py, "log_dir");
    let size_attr = pyo3::intern!(py, "size_bytes");
    for (i, p) in partitions.iter().enumerate() {
        let replicas = p.getattr(replicas_attr)?;
        let replicas = replicas.cast::<PyTuple>()?;
        for r in replicas.iter() {
            let broker: i64 = r.getattr(broker_attr)?.extract()?;
            let dir = r.getattr(dir_attr)?;
            let dir = if dir.is_none() { None } else { Some(dir.cast_into::<PyString>()?) };
            let size = r.getattr(size_attr)?.extract::<i64>().ok();
            if f(i, Fields { broker, dir, size }).is_none() {
                return Ok(None);
            }
        }
    }
    Ok(Some(()))
}

/// Slot of (broker, dir) among `slots`, matched by the dir's text.
struct Slots {
    by_broker: HashMap<i64, Vec<(Option<String>, usize)>>,
}

impl Slots {
    fn new(slots: Vec<(i64, Option<String>)>) -> Self {
        let mut by_broker: HashMap<i64, Vec<(Option<String>, usize)>> = HashMap::new();
        for (k, (b, path)) in slots.into_iter().enumerate() {
            by_broker.entry(b).or_default().push((path, k));
        }
        Slots { by_broker }
    }

    fn find(&self, broker: i64, dir: &Option<Bound<'_, PyString>>) -> Option<usize> {
        let dirs = self.by_broker.get(&broker)?;
        let text = match dir {
            None => None,
            Some(s) => Some(s.to_str().ok()?),
        };
        dirs.iter().find(|(path, _)| path.as_deref() == text).map(|&(_, k)| k)
    }
}

/// The per-dir index: `slots` lists (broker, dir path or None); returns per slot the
/// replicas' sizes and partition indexes, in partition order. The sizes are the records'
/// own int objects and each partition's index one object for all its replicas, as the
/// reference appends them (making 2.8M new ints cost more than the pass itself). None
/// when a replica is on a slot not listed (the caller runs the reference).
#[pyfunction]
pub fn dir_index(
    py: Python<'_>,
    partitions: &Bound<'_, PyTuple>,
    slots: Vec<(i64, Option<String>)>,
) -> PyResult<Option<Vec<(Py<PyList>, Py<PyList>)>>> {
    let n = slots.len();
    let slots = Slots::new(slots);
    let replicas_attr = pyo3::intern!(py, "replicas");
    let broker_attr = pyo3::intern!(py, "broker");
    let dir_attr = pyo3::intern!(py, "log_dir");
    let size_attr = pyo3::intern!(py, "size_bytes");
    let mut sizes: Vec<Vec<Bound<'_, PyAny>>> = (0..n).map(|_| Vec::new()).collect();
    let mut parts: Vec<Vec<Bound<'_, PyAny>>> = (0..n).map(|_| Vec::new()).collect();
    for (i, p) in partitions.iter().enumerate() {
        let index = i.into_pyobject(py)?.into_any();
        for r in p.getattr(replicas_attr)?.cast::<PyTuple>()?.iter() {
            let broker: i64 = r.getattr(broker_attr)?.extract()?;
            let dir = r.getattr(dir_attr)?;
            let dir = if dir.is_none() { None } else { Some(dir.cast_into::<PyString>()?) };
            let Some(k) = slots.find(broker, &dir) else { return Ok(None) };
            sizes[k].push(r.getattr(size_attr)?);
            parts[k].push(index.clone());
        }
    }
    let mut out = Vec::with_capacity(n);
    for (s, p) in sizes.into_iter().zip(parts) {
        out.push((PyList::new(py, s)?.unbind(), PyList::new(py, p)?.unbind()));
    }
    Ok(Some(out))
}

/// Replicas and bytes per broker (in `ids` order) and the partitions with an offline
/// replica, as `ClusterModel.broker_totals`: offline is on a broker not `alive`, on a
/// dir in `offline_dirs`, or with no dir on a broker in `with_offline_dir`. None when
/// a replica is on a broker not in `ids` or a figure is not an i64.
#[pyfunction]
pub fn broker_totals(
    partitions: &Bound<'_, PyTuple>,
    ids: Vec<i64>,
    alive: Vec<i64>,
    with_offline_dir: Vec<i64>,
    offline_dirs: Vec<(i64, String)>,
) -> PyResult<Option<(Vec<i64>, Vec<i64>, Vec<usize>)>> {
    let place: HashMap<i64, usize> = ids.iter().enumerate().map(|(k, &b)| (b, k)).collect();
    let mut counts = vec![0i64; ids.len()];
    let mut sizes = vec![0i64; ids.len()];
    let down: Vec<bool> = ids.iter().map(|b| !alive.contains(b)).collect();
    let flawed: Vec<bool> = ids.iter().map(|b| with_offline_dir.contains(b)).collect();
    let mut found: Vec<usize> = Vec::new();
    let done = each_replica(partitions, |i, r| {
        let k = *place.get(&r.broker)?;
        counts[k] += 1;
        sizes[k] = sizes[k].checked_add(r.size?)?;
        let offline = down[k]
            || (flawed[k]
                && match &r.dir {
                    None => true,
                    Some(d) => {
                        let d = d.to_str().ok()?;
                        offline_dirs.iter().any(|(b, p)| *b == r.broker && p == d)
                    }
                });
        if offline && found.last() != Some(&i) {
            found.push(i);
        }
        Some(())
    })?;
    Ok(done.map(|()| (counts, sizes, found)))
}
