//! Sizes: the median and p99 round trip of raw ping-pong and of echo calls as the message grows.

use lowlat::SpinPolicy;
use lowlat_report::{Results, SizePoint, SizeSeries};

use crate::bench;
use crate::run::lab::Lab;

/// Progress steps: one per transport.
pub(crate) const STEPS: u64 = 3;

pub(crate) fn run(lab: &mut Lab, results: &mut Results) {
    for scheme in ["udp", "tcp", "shm"] {
        lab.step(&format!("sizes: {scheme}"));
        let spin = SpinPolicy::Forever;
        let mut raw_points = Vec::new();
        let mut rpc_points = Vec::new();
        let sizes = lab.scale.sweep;
        let calls = (lab.scale.calls / 5).max(500);
        if let Ok((_srv, uri)) = lab.raw_server(scheme, spin) {
            for &size in sizes {
                if scheme == "udp" && size > 65_000 {
                    continue;
                }
                if let Ok((h, _)) = crate::pingpong::run(&uri, size, calls, calls / 10, spin, Default::default(), None)
                {
                    raw_points.push(SizePoint {
                        size: size as u32,
                        p50_ns: h.value_at_quantile(0.5) as f64,
                        p99_ns: h.value_at_quantile(0.99) as f64,
                    });
                }
            }
        }
        if let Ok((_srv, uri)) = lab.rpc_server(scheme, spin) {
            for &size in sizes {
                if let Ok(s) = bench::run(&lab.spec(&uri, "echo", size, calls, spin)) {
                    rpc_points.push(SizePoint { size: size as u32, p50_ns: s.p50_ns as f64, p99_ns: s.p99_ns as f64 });
                }
            }
        }
        results.size_sweep.push(SizeSeries { transport: scheme.into(), kind: "raw".into(), points: raw_points });
        results.size_sweep.push(SizeSeries { transport: scheme.into(), kind: "rpc".into(), points: rpc_points });
    }
}
