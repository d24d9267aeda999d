//! Accounting: where the time of a null call goes, part by part, for each local transport (the
//! work is `crate::account`'s; this runs it once per transport).

use lowlat::SpinPolicy;
use lowlat_report::{Accounting, Results};

use crate::account;
use crate::run::lab::Lab;

/// Progress steps: one per transport.
pub(crate) const STEPS: u64 = 3;

/// Returns each transport's send times (client, server) for the text table, which prints them
/// beside the accounting.
pub(crate) fn run(lab: &mut Lab, results: &mut Results) -> Vec<(f64, f64)> {
    let mut sends = Vec::new();
    for scheme in ["udp", "tcp", "shm"] {
        lab.step(&format!("accounting: {scheme}"));
        let bind = lab.bind_uri(scheme);
        let count = lab.scale.count_instructions;
        match account::account(&lab.exe, &bind, lab.scale.calls, SpinPolicy::Adaptive, &lab.place, count) {
            Ok((a, c, s)) => {
                results.accounting.push(a);
                sends.push((c, s));
            }
            Err(e) => results
                .accounting
                .push(Accounting { skipped: Some(e), ..Accounting::from_parts(scheme, 0, &[], 0.0, &[]) }),
        }
    }
    sends
}
