//! Threads (Firefly's Table I): calls per second and Mbit/s with 1 to 16 caller threads, for
//! the null call and a 1440-byte result, the callers pinned to the lab's client CPU and left to
//! the scheduler: whether callers that outnumber the CPUs keep the rate of one.

use lowlat::SpinPolicy;
use lowlat_report::{Results, ThreadsRow};

use crate::bench::{self, BenchSpec};
use crate::run::lab::Lab;

const SCHEMES: [&str; 4] = ["udp", "tcp", "shm", "onc+udp"];
const PROCS: [(&str, usize); 2] = [("null", 0), ("maxresult", 1440)];
const CALLERS: [usize; 5] = [1, 2, 4, 8, 16];
/// Calls in one run at most (shared memory's 3M a second would otherwise make runs of millions).
const MAX_CALLS: u64 = 2_000_000;

/// Progress steps: one per transport and procedure.
pub(crate) const STEPS: u64 = (SCHEMES.len() * PROCS.len()) as u64;

pub(crate) fn run(lab: &mut Lab, results: &mut Results) {
    for scheme in SCHEMES {
        for (proc, size) in PROCS {
            lab.step(&format!("threads: {scheme} {proc}"));
            let server = lab.rpc_server(scheme, SpinPolicy::Adaptive);
            // Each run lasts about the scale's seconds, by one caller's rate.
            let calls = server.as_ref().ok().and_then(|(_, uri)| {
                let probe =
                    bench::run(&lab.spec(uri, proc, size, lab.scale.threads_calls, SpinPolicy::Adaptive)).ok()?;
                Some(((probe.calls_per_s * lab.scale.threads_seconds) as u64).clamp(lab.scale.threads_calls, MAX_CALLS))
            });
            for unpinned in [false, true] {
                for t in CALLERS {
                    let r = server.as_ref().map_err(|e| e.clone()).and_then(|(_, uri)| {
                        let n = calls.unwrap_or(lab.scale.threads_calls);
                        let spec = lab.spec(uri, proc, size, n, SpinPolicy::Adaptive);
                        let cpu = if unpinned { None } else { spec.cpu };
                        bench::run(&BenchSpec { threads: t, cpu, ..spec }).map_err(|e| e.to_string())
                    });
                    results.threads.push(ThreadsRow {
                        transport: scheme.into(),
                        proc: proc.into(),
                        size: size as u32,
                        threads: t as u32,
                        unpinned,
                        calls_per_s: r.as_ref().ok().map(|s| s.calls_per_s),
                        mbit_per_s: r.as_ref().ok().map(|s| s.mbit_s),
                        skipped: r.err(),
                    });
                }
            }
        }
    }
}
