//! `schemas/snapshot_columns.py`: the snapshot's partitions as columns, read from the
//! JSON's bytes by `scan.rs`, checked here as `schemas/snapshot_decode.py` checks the
//! decoded records, and handed to Python one partition at a time where a plan names it.

use std::collections::HashSet;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::columns_delta;
use crate::columns_model;
use crate::scan::{self, NONE};

/// Partition i's replicas are `rep_start[i]..rep_start[i + 1]` of `broker`, `dir`
/// (an index into `dir_names`, NONE for null) and `size`; its ISR the same over `isr`.
#[pyclass(frozen)]
#[derive(Default)]
pub struct Columns {
    pub topics: Vec<String>,
    pub topic: Vec<u32>,
    pub number: Vec<i64>,
    pub leader: Vec<i64>,
    pub isr_start: Vec<u32>,
    pub isr: Vec<i64>,
    pub rep_start: Vec<u32>,
    pub broker: Vec<i64>,
    pub dir: Vec<u32>,
    pub size: Vec<i64>,
    pub dir_names: Vec<String>,
}

impl Columns {
    pub fn len(&self) -> usize {
        self.leader.len()
    }

    pub fn replicas(&self, i: usize) -> std::ops::Range<usize> {
        self.rep_start[i] as usize..self.rep_start[i + 1] as usize
    }

    pub fn isr_of(&self, i: usize) -> &[i64] {
        &self.isr[self.isr_start[i] as usize..self.isr_start[i + 1] as usize]
    }

    /// Index of `path` in `dir_names`, if any replica names it.
    pub fn dir_index(&self, path: &str) -> Option<u32> {
        self.dir_names.iter().position(|x| x == path).map(|k| k as u32)
    }

    /// Every partition's five fields read: the parser pushes a column per field seen,
    /// so a column of another length means a partition lacked or repeated one.
    fn whole(&self) -> bool {
        let n = self.len();
        self.topic.len() == n
            && self.number.len() == n
            && self.isr_start.len() == n + 1
            && self.rep_start.len() == n + 1
            && self.dir.len() == self.broker.len()
            && self.size.len() == self.broker.len()
    }

    fn unique_numbers(&self) -> bool {
        // Snapshots list a topic's partitions together, in rising order: a run of one
        // topic, rising, met once is unique; anything else takes the full check.
        let mut seen: HashSet<u32> = HashSet::new();
        let mut rising = true;
        for i in 0..self.len() {
            let t = self.topic[i];
            if i > 0 && t == self.topic[i - 1] {
                rising &= self.number[i] > self.number[i - 1];
            } else if !seen.insert(t) {
                rising = false;
            }
            if !rising {
                break;
            }
        }
        if rising {
            return true;
        }
        let mut all: HashSet<(u32, i64)> = HashSet::with_capacity(self.len());
        (0..self.len()).all(|i| all.insert((self.topic[i], self.number[i])))
    }
}

/// `Columns` from a snapshot's bytes and the rest of the document as a small JSON
/// object of its own, or None for anything the strict reader does not take.
#[pyfunction]
pub fn read_columns<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyBytes>,
) -> Option<(Bound<'py, PyBytes>, Columns)> {
    let bytes = data.as_bytes();
    let (header, columns) = py.detach(|| scan::read(bytes))?;
    columns.whole().then(|| (PyBytes::new(py, &header), columns))
}

#[pymethods]
impl Columns {
    fn __len__(&self) -> usize {
        self.len()
    }

    /// `snapshot_decode._references_hold` over the columns: each replica on a listed
    /// broker and, where it names one, one of that broker's dirs; no broker twice in a
    /// partition; leader (or `no_leader`) and ISR among the replicas; no (topic,
    /// partition) twice. `brokers`: each broker's id and dir paths.
    fn references_hold(&self, py: Python<'_>, brokers: Vec<(i64, Vec<String>)>, no_leader: i64) -> bool {
        py.detach(|| self.hold(&brokers, no_leader))
    }

    /// `model.broker_totals` over the columns.
    #[allow(clippy::type_complexity)]
    fn broker_totals(
        &self,
        py: Python<'_>,
        ids: Vec<i64>,
        alive: Vec<i64>,
        with_offline_dir: Vec<i64>,
        offline_dirs: Vec<(i64, String)>,
    ) -> Option<(Vec<i64>, Vec<i64>, Vec<usize>)> {
        py.detach(|| columns_model::broker_totals(self, &ids, &alive, &with_offline_dir, &offline_dirs))
    }

    /// `model.dir_index` over the columns.
    fn dir_index_of(
        &self,
        py: Python<'_>,
        slots: Vec<(i64, Option<String>)>,
    ) -> PyResult<Option<columns_model::DirLists>> {
        columns_model::dir_index(py, self, &slots)
    }

    /// These columns + a failure's delta (`columns_delta::with_delta`), as new columns:
    /// `brokers` the delta's, `parts` its partitions.
    fn with_delta(
        &self,
        py: Python<'_>,
        brokers: Vec<i64>,
        parts: Vec<columns_delta::NewPartition>,
    ) -> Columns {
        py.detach(|| columns_delta::with_delta(self, &brokers, &parts))
    }

    /// (topic, partition, leader, replica brokers) of partition `i`.
    fn row<'py>(&self, py: Python<'py>, i: usize) -> PyResult<(&str, i64, i64, Bound<'py, PyTuple>)> {
        let brokers = PyTuple::new(py, &self.broker[self.replicas(i)])?;
        Ok((&self.topics[self.topic[i] as usize], self.number[i], self.leader[i], brokers))
    }

    /// Partition `i` as a record: `partition(topic, number, leader, isr, replicas)`, each
    /// replica `replica(broker, log_dir, size)` (the classes of schemas/snapshot_types.py).
    fn record<'py>(
        &self,
        py: Python<'py>,
        i: usize,
        partition: &Bound<'py, PyAny>,
        replica: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut replicas = Vec::with_capacity(self.replicas(i).len());
        for k in self.replicas(i) {
            let d = self.dir[k];
            let dir = (d != NONE).then(|| self.dir_names[d as usize].as_str());
            replicas.push(replica.call1((self.broker[k], dir, self.size[k]))?);
        }
        let topic = &self.topics[self.topic[i] as usize];
        let isr = PyTuple::new(py, self.isr_of(i))?;
        let replicas = PyTuple::new(py, replicas)?;
        partition.call1((topic, self.number[i], self.leader[i], isr, replicas))
    }
}

impl Columns {
    fn hold(&self, brokers: &[(i64, Vec<String>)], no_leader: i64) -> bool {
        let mut slot: scan::FnvMap<i64, usize> = scan::FnvMap::default();
        // allowed[slot * dirs + d]: broker `slot` has the dir `dir_names[d]`.
        let dirs = self.dir_names.len();
        let mut allowed = vec![false; brokers.len() * dirs];
        for (k, (id, paths)) in brokers.iter().enumerate() {
            slot.insert(*id, k);
            for p in paths {
                if let Some(d) = self.dir_index(p) {
                    allowed[k * dirs + d as usize] = true;
                }
            }
        }
        let mut seen: Vec<i64> = Vec::with_capacity(8);
        for i in 0..self.len() {
            seen.clear();
            for k in self.replicas(i) {
                let b = self.broker[k];
                let Some(&s) = slot.get(&b) else { return false };
                let d = self.dir[k];
                if (d != NONE && !allowed[s * dirs + d as usize]) || seen.contains(&b) {
                    return false;
                }
                seen.push(b);
            }
            let leader = self.leader[i];
            if (leader != no_leader && !seen.contains(&leader))
                || !self.isr_of(i).iter().all(|x| seen.contains(x))
            {
                return false;
            }
        }
        self.unique_numbers()
    }
}
