//! Load: open-loop Poisson arrivals at fractions of the measured capacity, latency counted from
//! each call's scheduled time, beside the single-server queue's r = s/(1-u).

use lowlat::SpinPolicy;
use lowlat_report::{model_response_ns, LoadPoint, LoadSeries, Results};

use crate::bench::{self, BenchSpec};
use crate::run::lab::Lab;

/// The offered loads, as fractions u of the rate the series calls its capacity: dense near
/// saturation, where the model and the measurements part.
pub(super) const UTILISATIONS: [f64; 7] = [0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95];

/// Progress steps: one per transport.
pub(crate) const STEPS: u64 = 3;

pub(crate) fn run(lab: &mut Lab, results: &mut Results) {
    for scheme in ["udp", "tcp", "shm"] {
        lab.step(&format!("load: {scheme}"));
        let spin = SpinPolicy::Adaptive;
        let series = (|| -> Result<LoadSeries, String> {
            let (_srv, uri) = lab.rpc_server(scheme, spin)?;
            let cap = bench::run(&lab.spec(&uri, "null", 0, lab.scale.calls, spin)).map_err(|e| e.to_string())?;
            let capacity = cap.calls_per_s;
            let service_ns = 1e9 / capacity;
            let mut points = Vec::new();
            for u in UTILISATIONS {
                points.push(offer(lab, &uri, spin, u, capacity * u, service_ns)?);
            }
            Ok(LoadSeries {
                transport: scheme.into(),
                proc: "null".into(),
                size: 0,
                capacity_calls_per_s: Some(capacity),
                service_ns: Some(service_ns),
                points,
                skipped: None,
            })
        })();
        results.load.push(series.unwrap_or_else(|e| LoadSeries {
            transport: scheme.into(),
            proc: "null".into(),
            size: 0,
            capacity_calls_per_s: None,
            service_ns: None,
            points: Vec::new(),
            skipped: Some(e),
        }));
    }
}

/// Offers `rate` null calls per second (the fraction `u` of a capacity) to `uri` open loop for
/// the scale's load time, and returns the point with the model's r = s/(1-u) for the service
/// time `service_ns`, and the machine's floor for keeping that schedule, measured just before.
pub(super) fn offer(
    lab: &Lab,
    uri: &str,
    spin: SpinPolicy,
    u: f64,
    rate: f64,
    service_ns: f64,
) -> Result<LoadPoint, String> {
    let calls = ((rate * lab.scale.load_seconds) as u64).clamp(200, 200_000);
    let spec = BenchSpec { rate: Some(rate), ..lab.spec(uri, "null", 0, calls, spin) };
    let floor = bench::schedule_floor(&spec).map_err(|e| e.to_string())?;
    let (s, run) = bench::run_open(&spec).map_err(|e| e.to_string())?;
    Ok(LoadPoint {
        offered_fraction: u,
        offered_calls_per_s: rate,
        achieved_calls_per_s: s.calls_per_s,
        p50_ns: s.p50_ns as f64,
        p99_ns: s.p99_ns as f64,
        p999_ns: s.p999_ns as f64,
        model_ns: model_response_ns(service_ns, u),
        sent_calls_per_s: Some(run.sent_per_s),
        max_lag_ns: Some(run.max_lag_ns() as f64),
        late_fraction: Some(run.late_fraction()),
        floor_late_fraction: Some(floor.late_fraction),
        floor_max_lag_ns: Some(floor.max_lag_ns as f64),
        sustained: Some(run.sustained()),
        busy: Some(run.busy),
        failed: Some(run.failed),
    })
}
