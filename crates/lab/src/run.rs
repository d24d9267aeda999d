//! `lowlat lab`: the whole laboratory on this machine, with no configuration. It starts and stops
//! its own servers (child processes pinned to their own CPU), creates and removes network
//! namespaces when run as root, and writes `results.json`, the HdrHistogram logs and
//! `report.html`.
//!
//! This module is the run itself: the scale, the experiments in order (`experiments`), the
//! servers they ask for (`lab`), the text tables (`tables`) and the files written at the end.

mod experiments;
mod lab;
mod tables;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use lowlat_report::{BusyServer, Machine, Results, FORMAT_VERSION};

use crate::ladder::Placement;
use crate::run::lab::{Lab, FULL, QUICK};
use crate::workload;

fn write_outputs(out: &Path, results: &Results, histograms: &[(String, Histogram<u64>)]) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("create {}: {e}", out.display()))?;
    let json = out.join("results.json");
    std::fs::write(&json, results.to_json()).map_err(|e| format!("write {}: {e}", json.display()))?;
    let html = out.join("report.html");
    std::fs::write(&html, lowlat_report::render_html(results)).map_err(|e| format!("write {}: {e}", html.display()))?;
    let logs = out.join("histograms");
    std::fs::create_dir_all(&logs).map_err(|e| format!("create {}: {e}", logs.display()))?;
    for (name, h) in histograms {
        let path = logs.join(format!("{}.hlog", name.replace(['+', '/'], "_")));
        let mut file = std::fs::File::create(&path).map_err(|e| format!("create {}: {e}", path.display()))?;
        let mut ser = hdrhistogram::serialization::V2DeflateSerializer::new();
        let mut w = hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder::new()
            .add_comment(&format!("lowlat lab: {name}, round trips in ns"))
            .begin_log_with(&mut file, &mut ser)
            .map_err(|e| format!("write {}: {e}", path.display()))?;
        w.write_histogram(
            h,
            Duration::ZERO,
            Duration::from_secs(1),
            hdrhistogram::serialization::interval_log::Tag::new(name),
        )
        .map_err(|e| format!("write {}: {e:?}", path.display()))?;
    }
    println!(
        "wrote {}, {} and {} histogram logs in {}",
        json.display(),
        html.display(),
        histograms.len(),
        logs.display()
    );
    Ok(())
}

/// Runs the laboratory. Without `out`, results go to `lab-out/` in the current directory; with
/// `psk_file`, every lowlat server and caller binds with that key (ONC RPC and the peers do not
/// take one).
pub fn run_lab(quick: bool, out: Option<&Path>, psk_file: Option<&Path>) -> Result<(), String> {
    let psk = match psk_file {
        Some(p) => Some((p.to_path_buf(), lowlat::read_psk_file(p).map_err(|e| e.to_string())?)),
        None => None,
    };
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the lowlat executable: {e}"))?;
    let out = out.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("lab-out"));
    let place = Placement::detect();
    let scale = if quick { QUICK } else { FULL };
    let progress = ProgressBar::new(experiments::STEPS);
    progress.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    let mut machine = Machine::detect();
    machine.notes.push(match (place.server_cpu, place.client_cpu) {
        (Some(s), Some(c)) => format!("servers pinned to CPU {s}, callers to CPU {c}"),
        _ => "fewer than two CPUs: nothing pinned".into(),
    });
    if let Err(why) = lowlat_testkit::testhosts::check_root() {
        machine.notes.push(format!("raw Ethernet rows skipped: {why}"));
    }
    let mut results = Results {
        format_version: FORMAT_VERSION,
        machine,
        quick,
        ladder: Vec::new(),
        busy_server: BusyServer { workload: workload::description(), workload_alone_ns: None, rows: Vec::new() },
        threads: Vec::new(),
        load: Vec::new(),
        cold: Vec::new(),
        peers: Vec::new(),
        accounting: Vec::new(),
        cdf: Vec::new(),
        size_sweep: Vec::new(),
    };
    let mut lab = Lab::new(exe, place, scale, progress, psk);
    let started = Instant::now();
    let sends = experiments::run_all(&mut lab, &mut results, &out);
    lab.progress.finish_and_clear();
    tables::print(&results, &sends);
    println!("the laboratory took {:.0} s", started.elapsed().as_secs_f64());
    write_outputs(&out, &results, &lab.histograms)
}
