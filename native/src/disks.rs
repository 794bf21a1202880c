//! `core/plan/disks.py`: moving replicas out of one over-full dir, and the per-dir
//! index of the cluster model.

use pyo3::prelude::*;

/// Python's `i > f` for an int and a float: exact, as CPython compares them.
pub fn int_gt_float(i: i64, f: f64) -> bool {
    if f.is_nan() {
        return false;
    }
    if f >= 9_223_372_036_854_775_808.0 {
        return false;
    }
    if f < -9_223_372_036_854_775_808.0 {
        return true;
    }
    // For an integer i and a finite f: i > f exactly when i > floor(f), and floor(f)
    // is an integral float in i64's range here, so the cast is exact.
    i > f.floor() as i64
}

/// Python's `i < f` for an int and a float, exact as `int_gt_float`.
pub fn int_lt_float(i: i64, f: f64) -> bool {
    if f.is_nan() || f < -9_223_372_036_854_775_808.0 {
        return false;
    }
    if f >= 9_223_372_036_854_775_808.0 {
        return true;
    }
    // i < f exactly when i < ceil(f), an integral float in i64's range here.
    i < f.ceil() as i64
}

/// One source dir drained as `disks._drain` does: `sizes` are its replicas' bytes in
/// its list's order, `used` and `limits` every dir of the broker (in the broker's order),
/// `source` the index of the source among them. Returns the moves as (place in the
/// source's list, target dir index, bytes) and the dirs' bytes after them; None when a
/// figure does not fit in 64 bits (the caller runs the reference).
#[pyfunction]
pub fn drain_dir(
    sizes: Vec<i64>,
    source: usize,
    mut used: Vec<i64>,
    limits: Vec<f64>,
    tolerance: f64,
) -> Option<(Vec<(usize, usize, i64)>, Vec<i64>)> {
    if used.len() != limits.len() || source >= used.len() {
        return None;
    }
    // Sorted by size, then place: the order of the reference's packed keys.
    let mut keys: Vec<(i64, usize)> = sizes.iter().copied().zip(0..).collect();
    if keys.iter().any(|&(s, _)| s < 0) {
        return None;
    }
    keys.sort_unstable();
    let moved = drain(&keys, source, &mut used, &limits, tolerance)?;
    Some((moved, used))
}

/// `disks._over` for one dir: its bytes above its limit, tolerance included.
pub fn over(used: i64, limit: f64, tolerance: f64) -> bool {
    int_gt_float(used, limit * (1.0 + tolerance))
}

/// The drain itself over `keys`, (size, id) sorted, non-negative sizes: the moves as
/// (id, target dir index, bytes), `used` updated; None when a sum leaves 64 bits. The
/// keys stay in place: a moved one is skipped by `Left`'s links (the reference pops it
/// from its list, a copy of the rest each time: most of the time at 100,000 moves).
pub fn drain<T: Copy>(
    keys: &[(i64, T)],
    source: usize,
    used: &mut [i64],
    limits: &[f64],
    tolerance: f64,
) -> Option<Vec<(T, usize, i64)>> {
    let mut moved = Vec::new();
    let mut left = Left::new(keys.len());
    let limit = limits[source];
    while over(used[source], limit, tolerance) {
        let excess = used[source] as f64 - limit;
        let mut target = source;
        let mut room = f64::NEG_INFINITY;
        for (d, (&u, &l)) in used.iter().zip(limits).enumerate() {
            if d != source && l - u as f64 > room {
                target = d;
                room = l - u as f64;
            }
        }
        // The smallest replica that clears the excess, if it fits.
        let c = excess.ceil();
        let mut j = if c >= 9.2e18 {
            keys.len()
        } else {
            let c = c as i64;
            left.next(keys.partition_point(|&(s, _)| s < c))
        };
        if j == keys.len() || int_gt_float(keys[j].0, room) {
            // Else the largest that fits without overshooting.
            let m = excess.min(room).floor();
            let below = keys.partition_point(|&(s, _)| !int_gt_float(s, m));
            match left.prev(below) {
                Some(k) if keys[k].0 != 0 => j = k,
                _ => break,
            }
        }
        left.remove(j);
        let (size, k) = keys[j];
        used[source] -= size;
        used[target] = used[target].checked_add(size)?;
        moved.push((k, target, size));
    }
    Some(moved)
}

/// Which of n sorted keys are left: `next(j)` the first left at j or after (n: none),
/// `prev(j)` the last left before j. Links with path halving: a removed key points past
/// itself, so each query is a few steps.
struct Left {
    after: Vec<u32>,  // after[j]: j if left, else a later candidate; after[n] = n
    before: Vec<u32>, // before[j + 1]: j + 1 if key j is left, else an earlier candidate
}

impl Left {
    fn new(n: usize) -> Self {
        let all = (0..=n as u32).collect::<Vec<_>>();
        Left {
            after: all.clone(),
            before: all,
        }
    }

    fn next(&mut self, mut j: usize) -> usize {
        while self.after[j] as usize != j {
            let up = self.after[j] as usize;
            self.after[j] = self.after[up];
            j = up;
        }
        j
    }

    fn prev(&mut self, j: usize) -> Option<usize> {
        let mut j = j; // in before's places: key j - 1
        while self.before[j] as usize != j {
            let down = self.before[j] as usize;
            self.before[j] = self.before[down];
            j = down;
        }
        j.checked_sub(1)
    }

    fn remove(&mut self, j: usize) {
        self.after[j] = j as u32 + 1;
        self.before[j + 1] = j as u32;
    }
}
