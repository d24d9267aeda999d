//! The experiments of `lowlat lab`, in the order they run. Each has its own module that measures
//! one thing into its part of [`Results`] and says how many progress steps it takes; adding one
//! is that module, a line here, its text table and its part of the report.

mod accounting;
mod busy_server;
mod cold;
mod ethernet;
mod ladder;
mod load;
mod peers;
mod saturation;
mod size_sweep;
mod threads;

use std::path::Path;

use lowlat_report::Results;

use crate::run::lab::Lab;

/// Every experiment's progress steps: the progress bar's length.
pub(crate) const STEPS: u64 = ladder::STEPS
    + ethernet::STEPS
    + busy_server::STEPS
    + threads::STEPS
    + load::STEPS
    + saturation::STEPS
    + cold::STEPS
    + peers::STEPS
    + accounting::STEPS
    + size_sweep::STEPS;

/// Runs every experiment into `results` (the peers build under `out`). Returns the accounting's
/// send times, which the text tables print but `results.json` does not keep.
pub(crate) fn run_all(lab: &mut Lab, results: &mut Results, out: &Path) -> Vec<(f64, f64)> {
    ladder::run(lab, results);
    ethernet::run(lab, results);
    busy_server::run(lab, results);
    threads::run(lab, results);
    load::run(lab, results);
    saturation::run(lab, results);
    cold::run(lab, results);
    peers::run(lab, results, out);
    let sends = accounting::run(lab, results);
    size_sweep::run(lab, results);
    sends
}
