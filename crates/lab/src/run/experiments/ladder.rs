//! The ladder on this host: for each local transport, the machine's floor (where lowlat's
//! transport needs more than it), lowlat's raw ping-pong and its call, at 32 bytes and 1 KiB; and
//! the latency distribution of each null call. With `lab --remote` the network transports'
//! rungs are measured across the link (their servers on the other host), shared memory and
//! Unix sockets here; each row says which.

use hdrhistogram::Histogram;
use lowlat::SpinPolicy;
use lowlat_report::{CdfPoint, CdfSeries, LadderRow, Results};

use crate::run::lab::{lat, Lab};

/// The ladder's rows on this host: (row name, scheme for raw, scheme for RPC, spin, whether
/// lowlat's transport needs more than the machine's floor for the path, which is then measured
/// too: shared memory's rings, UDP's unconnected server socket).
const LOCAL_RUNGS: [(&str, &str, &str, SpinPolicy, bool); 9] = [
    ("udp", "udp", "udp", SpinPolicy::Forever, true),
    ("udp-block", "udp", "udp", SpinPolicy::Block, true),
    ("tcp", "tcp", "tcp", SpinPolicy::Forever, false),
    ("tcp-block", "tcp", "tcp", SpinPolicy::Block, false),
    ("unix", "unix", "", SpinPolicy::Forever, false),
    ("shm-spin", "shm", "shm", SpinPolicy::Forever, true),
    ("shm-block", "shm", "shm", SpinPolicy::Block, false),
    ("onc+udp", "udp", "onc+udp", SpinPolicy::Forever, false),
    ("onc+tcp", "tcp", "onc+tcp", SpinPolicy::Forever, false),
];

/// Progress steps: one per rung and size.
pub(crate) const STEPS: u64 = LOCAL_RUNGS.len() as u64 * 2;

pub(crate) fn run(lab: &mut Lab, results: &mut Results) {
    for (name, raw_scheme, rpc_scheme, spin, has_floor) in LOCAL_RUNGS {
        for size in [32usize, 1024] {
            lab.step(&format!("ladder: {name} {size} B"));
            let floor = has_floor.then(|| lab.floor(raw_scheme, size, spin));
            let raw = lab.raw(raw_scheme, size, spin);
            let rpc = if rpc_scheme.is_empty() {
                Err("no RPC over this baseline".to_string())
            } else {
                lab.rpc(rpc_scheme, size, spin)
            };
            let mut row =
                LadderRow::new(name, size as u32, raw.as_ref().ok().map(lat), rpc.as_ref().ok().map(|r| lat(&r.0)))
                    .with_floor(floor.as_ref().and_then(|f| f.as_ref().ok()).map(lat))
                    .across_link(lab.across(raw_scheme));
            let floor_err = floor.as_ref().and_then(|f| f.as_ref().err()).map(|e| format!("floor: {e}"));
            let why: Vec<String> =
                [raw.as_ref().err().cloned(), rpc.as_ref().err().cloned(), floor_err].into_iter().flatten().collect();
            if !why.is_empty() {
                row.skipped = Some(why.join("; "));
            }
            if size == 32 {
                if let Ok((_, h)) = &rpc {
                    results.cdf.push(cdf(name, h));
                }
            }
            results.ladder.push(row);
        }
    }
}

/// The null call's latency distribution at the quantiles the report's CDF plots.
fn cdf(transport: &str, h: &Histogram<u64>) -> CdfSeries {
    let qs = [0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9999, 1.0];
    CdfSeries {
        transport: transport.into(),
        proc: "null".into(),
        size: 32,
        points: qs.iter().map(|&q| CdfPoint { latency_ns: h.value_at_quantile(q) as f64, fraction: q }).collect(),
    }
}
