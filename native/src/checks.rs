//! `schemas/snapshot_decode.py`: the cross-references checked after decoding, over the
//! decoded records in place. Yes or no only, as there: on no, the checking walker
//! names what is wrong.

use std::collections::{HashMap, HashSet};

use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

/// Every replica on a listed broker and, where it names one, one of that broker's
/// dirs; no broker twice in a partition; leader (or `no_leader`) and ISR among the
/// replicas; no (topic, partition) twice.
#[pyfunction]
pub fn references_hold(
    partitions: &Bound<'_, PyTuple>,
    dirs: HashMap<i64, Vec<String>>,
    no_leader: i64,
) -> PyResult<bool> {
    let py = partitions.py();
    let replicas_attr = pyo3::intern!(py, "replicas");
    let broker_attr = pyo3::intern!(py, "broker");
    let dir_attr = pyo3::intern!(py, "log_dir");
    let leader_attr = pyo3::intern!(py, "leader");
    let isr_attr = pyo3::intern!(py, "isr");
    let topic_attr = pyo3::intern!(py, "topic");
    let number_attr = pyo3::intern!(py, "partition");
    let mut brokers: Vec<i64> = Vec::with_capacity(8);
    // A topic's partitions come together: numbers are checked per run of one topic,
    // and a topic met again in a later run takes the check over every pair.
    let mut topics_seen: HashSet<String> = HashSet::new();
    let mut run_topic = String::new();
    let mut run_numbers: HashSet<i64> = HashSet::new();
    let mut split_topic = false;
    for p in partitions.iter() {
        brokers.clear();
        for r in p.getattr(replicas_attr)?.cast::<PyTuple>()?.iter() {
            let b: i64 = r.getattr(broker_attr)?.extract()?;
            let Some(paths) = dirs.get(&b) else { return Ok(false) };
            let dir = r.getattr(dir_attr)?;
            if !dir.is_none() {
                let dir = dir.cast_into::<PyString>()?;
                let text = dir.to_str()?;
                if !paths.iter().any(|x| x == text) {
                    return Ok(false);
                }
            }
            if brokers.contains(&b) {
                return Ok(false);
            }
            brokers.push(b);
        }
        let leader: i64 = p.getattr(leader_attr)?.extract()?;
        if leader != no_leader && !brokers.contains(&leader) {
            return Ok(false);
        }
        for x in p.getattr(isr_attr)?.cast::<PyTuple>()?.iter() {
            if !brokers.contains(&x.extract::<i64>()?) {
                return Ok(false);
            }
        }
        let topic = p.getattr(topic_attr)?.cast_into::<PyString>()?;
        let topic = topic.to_str()?;
        let number: i64 = p.getattr(number_attr)?.extract()?;
        if split_topic {
            continue;
        }
        if topic != run_topic {
            if topics_seen.contains(topic) {
                split_topic = true;
                continue;
            }
            topics_seen.insert(topic.to_owned());
            run_topic = topic.to_owned();
            run_numbers.clear();
        }
        if !run_numbers.insert(number) {
            return Ok(false);
        }
    }
    if split_topic {
        // Every pair again, from the start: the runs so far were unique within
        // themselves, but a split topic may repeat a number of an earlier run.
        let mut all: HashSet<(String, i64)> = HashSet::new();
        for p in partitions.iter() {
            let topic = p.getattr(topic_attr)?.cast_into::<PyString>()?;
            let number: i64 = p.getattr(number_attr)?.extract()?;
            if !all.insert((topic.to_str()?.to_owned(), number)) {
                return Ok(false);
            }
        }
    }
    Ok(true)
}
