//! A failure's delta applied to the columns (`schemas/snapshot_delta.py`,
//! `apply_delta`, over `Columns` instead of the document): the job keeps each cluster's
//! latest full snapshot as columns and plans from base + delta without a record made
//! for every partition.

use crate::columns::Columns;
use crate::scan::{FnvMap, NONE};

/// (topic, partition, leader, isr, replicas as (broker, dir, size)).
pub type NewPartition = (String, i64, i64, Vec<i64>, Vec<(i64, Option<String>, i64)>);

struct Builder {
    out: Columns,
    topic_of: FnvMap<String, u32>,
    dir_of: FnvMap<String, u32>,
}

impl Builder {
    fn new(base: &Columns) -> Self {
        let index = |names: &[String]| -> FnvMap<String, u32> {
            names.iter().enumerate().map(|(k, s)| (s.clone(), k as u32)).collect()
        };
        let out = Columns {
            topics: base.topics.clone(),
            dir_names: base.dir_names.clone(),
            isr_start: vec![0],
            rep_start: vec![0],
            ..Columns::default()
        };
        Builder { topic_of: index(&base.topics), dir_of: index(&base.dir_names), out }
    }

    fn copy(&mut self, base: &Columns, i: usize) {
        let o = &mut self.out;
        o.topic.push(base.topic[i]);
        o.number.push(base.number[i]);
        o.leader.push(base.leader[i]);
        o.isr.extend_from_slice(base.isr_of(i));
        o.isr_start.push(o.isr.len() as u32);
        let r = base.replicas(i);
        o.broker.extend_from_slice(&base.broker[r.clone()]);
        o.dir.extend_from_slice(&base.dir[r.clone()]);
        o.size.extend_from_slice(&base.size[r]);
        o.rep_start.push(o.broker.len() as u32);
    }

    fn push(&mut self, p: &NewPartition) {
        let (topic, number, leader, isr, replicas) = p;
        let t = intern(&mut self.topic_of, &mut self.out.topics, topic);
        let o = &mut self.out;
        o.topic.push(t);
        o.number.push(*number);
        o.leader.push(*leader);
        o.isr.extend_from_slice(isr);
        o.isr_start.push(o.isr.len() as u32);
        for (broker, dir, size) in replicas {
            let d = match dir {
                Some(path) => intern(&mut self.dir_of, &mut self.out.dir_names, path),
                None => NONE,
            };
            let o = &mut self.out;
            o.broker.push(*broker);
            o.dir.push(d);
            o.size.push(*size);
        }
        self.out.rep_start.push(self.out.broker.len() as u32);
    }
}

fn intern(index: &mut FnvMap<String, u32>, names: &mut Vec<String>, name: &str) -> u32 {
    if let Some(&k) = index.get(name) {
        return k;
    }
    let k = names.len() as u32;
    names.push(name.to_owned());
    index.insert(name.to_owned(), k);
    k
}

/// base + delta, in `apply_delta`'s order: the base's partitions in place, one the delta
/// lists replaced by the delta's, one the base had on the delta's `brokers` that the
/// delta lacks dropped (deleted since); then the delta's partitions the base lacked, in
/// the delta's order.
pub fn with_delta(base: &Columns, brokers: &[i64], parts: &[NewPartition]) -> Columns {
    let mut b = Builder::new(base);
    let mut wanted: FnvMap<(u32, i64), usize> = FnvMap::default();
    for (j, p) in parts.iter().enumerate() {
        if let Some(&t) = b.topic_of.get(&p.0) {
            wanted.insert((t, p.1), j);
        }
    }
    let mut used = vec![false; parts.len()];
    for i in 0..base.len() {
        if let Some(&j) = wanted.get(&(base.topic[i], base.number[i])) {
            used[j] = true;
            b.push(&parts[j]);
        } else if !base.broker[base.replicas(i)].iter().any(|x| brokers.contains(x)) {
            b.copy(base, i);
        }
    }
    for (j, p) in parts.iter().enumerate() {
        if !used[j] {
            b.push(p);
        }
    }
    b.out
}

