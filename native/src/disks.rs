//! `core/plan/disks.py`: moving replicas out of one over-full dir, and the per-dir
//! index of the cluster model.

use pyo3::prelude::*;

/// Python's `i > f` for an int and a float: exact, as CPython compares them.
fn int_gt_float(i: i64, f: f64) -> bool {
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
    let moved = drain(&mut keys, source, &mut used, &limits, tolerance)?;
    Some((moved, used))
}

/// `disks._over` for one dir: its bytes above its limit, tolerance included.
pub fn over(used: i64, limit: f64, tolerance: f64) -> bool {
    int_gt_float(used, limit * (1.0 + tolerance))
}

/// The drain itself over `keys`, (size, id) sorted, non-negative sizes: the moves as
/// (id, target dir index, bytes), `used` updated; None when a sum leaves 64 bits.
pub fn drain<T: Copy>(
    keys: &mut Vec<(i64, T)>,
    source: usize,
    used: &mut [i64],
    limits: &[f64],
    tolerance: f64,
) -> Option<Vec<(T, usize, i64)>> {
    let mut moved = Vec::new();
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
            keys.partition_point(|&(s, _)| s < c)
        };
        if j == keys.len() || int_gt_float(keys[j].0, room) {
            // Else the largest that fits without overshooting.
            let m = excess.min(room).floor();
            let below = keys.partition_point(|&(s, _)| !int_gt_float(s, m));
            if below == 0 || keys[below - 1].0 == 0 {
                break;
            }
            j = below - 1;
        }
        let (size, k) = keys.remove(j);
        used[source] -= size;
        used[target] = used[target].checked_add(size)?;
        moved.push((k, target, size));
    }
    Some(moved)
}
