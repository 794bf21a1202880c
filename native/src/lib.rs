//! The compiled planning core: the hot loops of the planners, called from Python.
//!
//! Python stays the reference (`SELFHEAL_NATIVE=0`): every function here must give
//! exactly what its Python twin gives, float rounding included, or return None so the
//! caller runs the reference instead (for inputs outside what it handles, such as
//! integers over 64 bits).

use pyo3::prelude::*;

mod checks;
mod columns;
mod columns_delta;
mod columns_model;
mod disk_plan;
mod disks;
mod flow;
mod leader_chains;
mod leader_direct;
mod leader_json;
mod leader_read;
mod leaders;
mod model;
mod scan;
mod scan_partitions;

#[pymodule]
fn selfheal_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(checks::references_hold, m)?)?;
    m.add_function(wrap_pyfunction!(disks::drain_dir, m)?)?;
    m.add_function(wrap_pyfunction!(disk_plan::disk_plan, m)?)?;
    m.add_function(wrap_pyfunction!(disk_plan::dir_sums, m)?)?;
    m.add_function(wrap_pyfunction!(flow::sticky_flow, m)?)?;
    m.add_function(wrap_pyfunction!(leaders::leader_targets, m)?)?;
    m.add_function(wrap_pyfunction!(leader_read::leader_targets_columns, m)?)?;
    m.add_function(wrap_pyfunction!(leader_json::leader_plan_json, m)?)?;
    m.add_function(wrap_pyfunction!(columns::read_columns, m)?)?;
    m.add_class::<columns::Columns>()?;
    m.add_function(wrap_pyfunction!(model::dir_index, m)?)?;
    m.add_function(wrap_pyfunction!(model::broker_totals, m)?)?;
    Ok(())
}
