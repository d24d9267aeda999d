//! Threads (Firefly's Table I): calls per second and Mbit/s with 1 to 8 caller threads, for the
//! null call and a 1440-byte result.

use lowlat::SpinPolicy;
use lowlat_report::{Results, ThreadsRow};

use crate::bench::{self, BenchSpec};
use crate::run::lab::Lab;

/// Progress steps: one per transport and procedure.
pub(crate) const STEPS: u64 = 3 * 2;

pub(crate) fn run(lab: &mut Lab, results: &mut Results) {
    for scheme in ["udp", "tcp", "shm"] {
        for (proc, size) in [("null", 0usize), ("maxresult", 1440)] {
            lab.step(&format!("threads: {scheme} {proc}"));
            let server = lab.rpc_server(scheme, SpinPolicy::Adaptive);
            for t in [1usize, 2, 4, 8] {
                let r = server.as_ref().map_err(|e| e.clone()).and_then(|(_, uri)| {
                    let spec = BenchSpec {
                        threads: t,
                        ..lab.spec(uri, proc, size, lab.scale.threads_calls, SpinPolicy::Adaptive)
                    };
                    bench::run(&spec).map_err(|e| e.to_string())
                });
                results.threads.push(ThreadsRow {
                    transport: scheme.into(),
                    proc: proc.into(),
                    size: size as u32,
                    threads: t as u32,
                    calls_per_s: r.as_ref().ok().map(|s| s.calls_per_s),
                    mbit_per_s: r.as_ref().ok().map(|s| s.mbit_s),
                    skipped: r.err(),
                });
            }
        }
    }
}
