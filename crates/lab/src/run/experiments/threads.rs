//! Threads (Firefly's Table I): calls per second and Mbit/s with 1 to 16 caller threads, for
//! the null call and a 1440-byte result, the callers pinned to the lab's client CPU and left to
//! the scheduler: whether callers that outnumber the CPUs keep the rate of one.
//!
//! Each placement is measured in rounds, every count of callers once per round, in turn, and
//! each count's rate is set against one caller's in the same round: a host whose speed drifts
//! over seconds (a shared VM's) then moves both alike, where one run of each would compare
//! moments apart. The table gives the medians over the rounds.

use lowlat::SpinPolicy;
use lowlat_report::{Results, ThreadsRow};

use crate::bench::{self, BenchSpec};
use crate::latency::{median, Summary};
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
                // runs[round][i]: CALLERS[i] callers in that round.
                let mut runs: Vec<Vec<Result<Summary, String>>> = Vec::new();
                for _ in 0..lab.scale.threads_rounds {
                    let round = CALLERS.map(|t| {
                        server.as_ref().map_err(|e| e.clone()).and_then(|(_, uri)| {
                            let n = calls.unwrap_or(lab.scale.threads_calls);
                            let spec = lab.spec(uri, proc, size, n, SpinPolicy::Adaptive);
                            let cpu = if unpinned { None } else { spec.cpu };
                            bench::run(&BenchSpec { threads: t, cpu, ..spec }).map_err(|e| e.to_string())
                        })
                    });
                    runs.push(round.into());
                }
                for (i, &t) in CALLERS.iter().enumerate() {
                    let row = ThreadsRow {
                        transport: scheme.into(),
                        proc: proc.into(),
                        size: size as u32,
                        threads: t as u32,
                        unpinned,
                        calls_per_s: None,
                        mbit_per_s: None,
                        rounds: runs.len() as u32,
                        of_one_caller_by_round: None,
                        skipped: None,
                    };
                    results.threads.push(summarise(row, &runs, i));
                }
            }
        }
    }
}

/// `row` with the medians of column `i` of `runs` (its rate against column 0's, round by round),
/// or the first failure, if any run failed.
fn summarise(row: ThreadsRow, runs: &[Vec<Result<Summary, String>>], i: usize) -> ThreadsRow {
    let mut rates = Vec::new();
    let mut mbits = Vec::new();
    let mut ratios = Vec::new();
    for round in runs {
        match &round[i] {
            Err(e) => return ThreadsRow { skipped: Some(e.clone()), ..row },
            Ok(s) => {
                rates.push(s.calls_per_s);
                mbits.push(s.mbit_s);
                if let Ok(one) = &round[0] {
                    if one.calls_per_s > 0.0 {
                        ratios.push(s.calls_per_s / one.calls_per_s);
                    }
                }
            }
        }
    }
    if rates.is_empty() {
        return row;
    }
    ThreadsRow {
        calls_per_s: Some(median(&mut rates)),
        mbit_per_s: Some(median(&mut mbits)),
        of_one_caller_by_round: (!ratios.is_empty()).then(|| median(&mut ratios)),
        ..row
    }
}
