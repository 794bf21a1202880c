//! `core/plan/leaders.py`'s direct hand-offs: `_direct_pass` and `_give`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::leaders::{State, NONE};
use crate::scan::FnvMap;

/// Brokers by falling count, ties by rank (Python's stable sort on `-count`).
pub fn by_falling_count(state: &State) -> Vec<u32> {
    let mut order: Vec<u32> = (0..state.brokers() as u32).collect();
    order.sort_by_key(|&b| Reverse(state.count[b as usize]));
    order
}

/// `leaders._direct_pass`.
pub fn direct_pass(state: &mut State, source_over: Option<i64>, target_under: Option<i64>) {
    let limit = |ca: i64| -> i64 {
        if source_over.is_some_and(|s| ca <= s) {
            return -1;
        }
        target_under.map_or(ca - 2, |t| (ca - 2).min(t - 1))
    };
    let mut moved = true;
    while moved {
        moved = false;
        let low = *state.count.iter().min().unwrap_or(&0);
        for a in by_falling_count(state) {
            let top = limit(state.count[a as usize]);
            if top < low {
                continue;
            }
            let before = state.count[a as usize];
            give(state, a, top, low, &limit);
            if state.count[a as usize] != before {
                moved = true;
            }
        }
    }
}

/// Queue entry: (leaders, rack density's bits, partition, tag): a density is never
/// negative, so its bits order as the float does. Tag -1: one offer with several
/// possible targets; else the broker whose group of single-target offers it heads.
type Entry = Reverse<(i64, u64, u32, i64)>;
type GroupKey = (u32, i64, u64);

/// `leaders._give`, step for step.
fn give(state: &mut State, a: u32, mut top: i64, low: i64, limit: &dyn Fn(i64) -> i64) {
    // Keyed by partitions and small tuples: a cheap hash (no iteration order is used).
    let mut others: FnvMap<u32, Vec<u32>> = FnvMap::default();
    let mut solo: FnvMap<GroupKey, Vec<u32>> = FnvMap::default();
    let mut offers: Vec<Entry> = Vec::new();
    for i in state.led.iter(a as usize) {
        let count = &state.count;
        let takes = |&b: &u32| b != a && count[b as usize] <= top;
        // The candidates that may take it, listed only when there are two or more.
        let mut fit = state.cands(i).iter().copied().filter(takes);
        let Some(first) = fit.next() else {
            continue;
        };
        if fit.next().is_none() {
            let key = (first, count[first as usize], state.density(first).to_bits());
            solo.entry(key).or_default().push(i);
            continue;
        }
        let light: Vec<u32> = state.cands(i).iter().copied().filter(takes).collect();
        let (mut b, mut cb) = (first, count[first as usize]);
        for &x in &light {
            let cx = count[x as usize];
            if cx < cb || (cx == cb && state.density(x) < state.density(b)) {
                (b, cb) = (x, cx);
            }
        }
        others.insert(i, light);
        offers.push(Reverse((cb, state.density(b).to_bits(), i, -1)));
    }
    for (&(b, w, d), group) in solo.iter_mut() {
        group.sort_unstable_by(|x, y| y.cmp(x));
        offers.push(Reverse((w, d, group[group.len() - 1], i64::from(b))));
    }
    let mut heap = BinaryHeap::from(offers);

    fn join(
        solo: &mut FnvMap<GroupKey, Vec<u32>>,
        heap: &mut BinaryHeap<Entry>,
        key: GroupKey,
        mut parts: Vec<u32>,
    ) {
        let Some(&head) = parts.last() else { return };
        match solo.get_mut(&key) {
            None => {
                solo.insert(key, parts);
                heap.push(Reverse((key.1, key.2, head, i64::from(key.0))));
            }
            Some(group) => {
                let earlier = head < group[group.len() - 1];
                parts.extend_from_slice(group);
                parts.sort_unstable_by(|x, y| y.cmp(x));
                *group = parts;
                if earlier {
                    heap.push(Reverse((key.1, key.2, head, i64::from(key.0))));
                }
            }
        }
    }

    while let Some(&Reverse((weight, dens, _, _))) = heap.peek() {
        if !(low <= top && top >= weight) {
            break;
        }
        let mut stale: Vec<(u32, Vec<u32>)> = Vec::new();
        let mut ready: i64 = -1;
        let mut target = NONE;
        while let Some(&Reverse((w, d, i, tag))) = heap.peek() {
            if w != weight || d != dens {
                break;
            }
            if tag < 0 {
                let light = others.get_mut(&i).expect("an offer's targets");
                let (mut b, mut cb) = (NONE, top);
                for &x in light.iter() {
                    let cx = state.count[x as usize];
                    if cx > cb || (cx == cb && b != NONE && state.density(x) >= state.density(b)) {
                        continue;
                    }
                    (b, cb) = (x, cx);
                }
                if b == NONE {
                    heap.pop();
                    continue;
                }
                let db = state.density(b);
                if cb > weight || (cb == weight && db > f64::from_bits(dens)) {
                    light.retain(|&x| state.count[x as usize] <= top);
                    heap.pop();
                    if light.len() == 1 {
                        others.remove(&i);
                        join(&mut solo, &mut heap, (b, cb, db.to_bits()), vec![i]);
                    } else {
                        heap.push(Reverse((cb, db.to_bits(), i, -1)));
                    }
                    continue;
                }
                heap.pop();
                (ready, target) = (i64::from(i), b);
                break;
            }
            heap.pop();
            let b = tag as u32;
            let key = (b, weight, dens);
            if stale.iter().any(|(s, _)| *s == b)
                || solo.get(&key).and_then(|g| g.last()) != Some(&i)
            {
                continue; // an older head of a group that has since changed
            }
            let cb = state.count[b as usize];
            if cb > top {
                solo.remove(&key); // b may take none of them any more
                continue;
            }
            let db = state.density(b);
            if cb > weight || (cb == weight && db > f64::from_bits(dens)) {
                stale.push((b, solo.remove(&key).expect("a group")));
                continue;
            }
            (ready, target) = (i64::from(i), b);
            let group = solo.get_mut(&key).expect("a group");
            group.pop();
            match group.last() {
                Some(&next) => heap.push(Reverse((weight, dens, next, tag))),
                None => {
                    solo.remove(&key);
                }
            }
            break;
        }
        for (b, mut group) in stale {
            let mut cut = group.len();
            while cut > 0 && (ready < 0 || i64::from(group[cut - 1]) < ready) {
                cut -= 1;
            }
            let parts = group.split_off(cut);
            let key = (b, state.count[b as usize], state.density(b).to_bits());
            join(&mut solo, &mut heap, key, parts);
            if let Some(&head) = group.last() {
                heap.push(Reverse((weight, dens, head, i64::from(b))));
                solo.insert((b, weight, dens), group);
            }
        }
        if ready >= 0 {
            state.mv(ready as u32, target);
            top = limit(state.count[a as usize]);
        }
    }
}
