//! A busy server: raw ping-pong and null calls while the server's CPU also runs a CPU-bound
//! workload, and how much the calls slow that workload down. With `lab --remote` the workload
//! runs where the server does: on the other host for udp and tcp, here for shared memory.

use std::time::Duration;

use lowlat::SpinPolicy;
use lowlat_report::{BusyRow, Results};

use crate::bench;
use crate::run::lab::{lat, Lab};

/// Progress steps: one per transport.
pub(crate) const STEPS: u64 = 3;

pub(crate) fn run(lab: &mut Lab, results: &mut Results) {
    let alone_s = if lab.scale.calls < 10_000 { 0.5 } else { 2.0 };
    let alone_here = workload_run(lab, alone_s, false, None);
    let alone_there = if lab.remote.is_some() { workload_run(lab, alone_s, true, None) } else { alone_here.clone() };
    // The figure the report prints beside the rows is the network transports' server's.
    results.busy_server.workload_alone_ns = alone_there.as_ref().ok().copied();
    for scheme in ["udp", "tcp", "shm"] {
        lab.step(&format!("busy server: {scheme}"));
        let alone = if lab.across(scheme) { &alone_there } else { &alone_here };
        let row = busy_row(lab, scheme, alone.as_ref().ok().copied());
        results.busy_server.rows.push(row.unwrap_or_else(|e| BusyRow {
            transport: scheme.into(),
            size: 32,
            raw: None,
            rpc: None,
            round_trips_per_s: None,
            workload_slowdown: None,
            skipped: Some(e),
        }));
    }
}

/// Runs the workload on the server's CPU for `seconds` (the other host's when `there`),
/// concurrently with `during`; returns ns per unit.
fn workload_run(
    lab: &mut Lab,
    seconds: f64,
    there: bool,
    during: Option<&mut dyn FnMut(&mut Lab)>,
) -> Result<f64, String> {
    let w = lab.workload(seconds, there)?;
    if let Some(f) = during {
        f(lab);
    }
    let line = w.next_line(Duration::from_secs_f64(seconds + 30.0)).ok_or("the workload printed no result")?;
    let v: serde_json::Value = serde_json::from_str(&line).map_err(|e| format!("workload output {line:?}: {e}"))?;
    v["ns_per_unit"].as_f64().ok_or_else(|| "workload output lacks ns_per_unit".to_string())
}

fn busy_row(lab: &mut Lab, scheme: &str, alone: Option<f64>) -> Result<BusyRow, String> {
    let seconds = if lab.scale.calls < 10_000 { 1.0 } else { 4.0 };
    let mut raw = Err(String::new());
    let mut rpc = Err(String::new());
    let spin = SpinPolicy::Adaptive;
    let calls = lab.scale.calls / 2;
    let mut during = |lab: &mut Lab| {
        raw = lab.raw(scheme, 32, spin);
        rpc = (|| {
            let (_srv, uri) = lab.rpc_server(scheme, spin)?;
            bench::run(&lab.spec(&uri, "null", 0, calls, spin)).map_err(|e| e.to_string())
        })();
    };
    let there = lab.across(scheme);
    let loaded = workload_run(lab, seconds, there, Some(&mut during))?;
    let raw = raw?;
    let rpc = rpc?;
    Ok(BusyRow {
        transport: scheme.into(),
        size: 32,
        raw: Some(lat(&raw)),
        rpc: Some(lat(&rpc)),
        round_trips_per_s: Some(rpc.calls_per_s),
        workload_slowdown: alone.map(|a| loaded / a),
        skipped: None,
    })
}
