//! Cold calls: the first call after 1, 10 and 100 ms of idleness (the median of several), beside
//! the median of back-to-back calls.

use std::time::{Duration, Instant};

use lowlat::{ClientConfig, SpinPolicy};
use lowlat_report::{ColdRow, Results};

use crate::interface::LabClient;
use crate::latency::median;
use crate::run::lab::Lab;

/// Progress steps: one per transport.
pub(crate) const STEPS: u64 = 3;

pub(crate) fn run(lab: &mut Lab, results: &mut Results) {
    for scheme in ["udp", "tcp", "shm"] {
        lab.step(&format!("cold calls: {scheme}"));
        let rows = (|| -> Result<Vec<ColdRow>, String> {
            let (_srv, uri) = lab.rpc_server(scheme, SpinPolicy::Adaptive)?;
            lab.pin_client();
            let cfg = ClientConfig { psk: lab.psk.as_ref().map(|(_, k)| k.clone()), ..ClientConfig::default() };
            let c = LabClient::connect(&uri, cfg).map_err(|e| e.to_string())?;
            let mut warm = Vec::new();
            for _ in 0..2000 {
                let t = Instant::now();
                c.null().map_err(|e| e.to_string())?;
                warm.push(t.elapsed().as_nanos() as f64);
            }
            let warm_p50 = median(&mut warm);
            let mut rows = Vec::new();
            for idle_ms in [1u32, 10, 100] {
                let mut firsts = Vec::new();
                for _ in 0..lab.scale.cold_repeats {
                    std::thread::sleep(Duration::from_millis(idle_ms as u64));
                    let t = Instant::now();
                    c.null().map_err(|e| e.to_string())?;
                    firsts.push(t.elapsed().as_nanos() as f64);
                }
                rows.push(ColdRow {
                    transport: scheme.into(),
                    idle_ms,
                    first_call_ns: Some(median(&mut firsts)),
                    warm_p50_ns: Some(warm_p50),
                    repeats: lab.scale.cold_repeats,
                    skipped: None,
                });
            }
            Ok(rows)
        })();
        match rows {
            Ok(r) => results.cold.extend(r),
            Err(e) => results.cold.push(ColdRow {
                transport: scheme.into(),
                idle_ms: 1,
                first_call_ns: None,
                warm_p50_ns: None,
                repeats: 0,
                skipped: Some(e),
            }),
        }
    }
}
