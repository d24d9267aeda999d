//! `lowlat lab`: the whole laboratory on this machine, with no configuration. It starts and stops
//! its own servers (child processes pinned to their own CPU), creates and removes network
//! namespaces when run as root, and writes `results.json`, the HdrHistogram logs and
//! `report.html`. With `--remote HOST`, the network transports' servers run on another host,
//! started there by `lowlat agent`, and the report names both machines and the link's floor.
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
use lowlat_report::{BusyServer, Machine, RemoteHost, Results, FORMAT_VERSION};

use crate::agent::{facts, AgentClient};
use crate::ladder::Placement;
use crate::run::lab::{Lab, RemoteEnd, FULL, QUICK};
use crate::workload;

/// The other host of `lowlat lab --remote`.
#[derive(Clone, Copy, Debug)]
pub struct RemoteOptions<'a> {
    /// The agent's address, `HOST[:PORT]`.
    pub agent: &'a str,
    /// The key file the agent was started with.
    pub key_file: &'a Path,
}

/// What stays on this machine in a run across two hosts, and why, as the report says it.
const LOCAL_ONLY: [&str; 4] = [
    "shared memory (shm-spin, shm-block) and Unix sockets: same-machine transports",
    "accounting: it joins both sides' moments of each call on one clock, which two hosts do not share",
    "peers: their scripts start their servers on this machine, so lowlat's rows beside them stay here too",
    "the busy server's, threads', load's, saturation's, cold calls' and sizes' shm rows",
];

/// Binds to the agent and learns both ends of the link.
fn connect_remote(o: RemoteOptions<'_>) -> Result<(RemoteEnd, Machine), String> {
    let key = lowlat::read_psk_file(o.key_file).map_err(|e| e.to_string())?;
    let agent = AgentClient::connect(o.agent, Some(key)).map_err(|e| e.to_string())?;
    let there = agent.machine().map_err(|e| e.to_string())?;
    let ip = agent.addr().ip();
    let iface = facts::interface_toward(ip).map(|(name, _)| name);
    let peer_mac = there.nic.as_ref().and_then(|n| n.mac.clone());
    Ok((RemoteEnd { agent, ip, iface, peer_mac }, there))
}

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
/// take one); with `remote`, the network transports' servers run on the agent's host (a
/// `psk_file` must then hold the agent's key, which its servers bind with).
pub fn run_lab(
    quick: bool,
    out: Option<&Path>,
    psk_file: Option<&Path>,
    remote: Option<RemoteOptions<'_>>,
) -> Result<(), String> {
    let psk = match psk_file {
        Some(p) => Some((p.to_path_buf(), lowlat::read_psk_file(p).map_err(|e| e.to_string())?)),
        None => None,
    };
    if let (Some((path, _)), Some(r)) = (&psk, remote) {
        // The keys as `read_psk_file` takes them: the bytes less one trailing line end.
        let bytes = |p: &Path| {
            std::fs::read(p).ok().map(|b| {
                let b = b.strip_suffix(b"\n").map_or(&b[..], |k| k.strip_suffix(b"\r").unwrap_or(k));
                b.to_vec()
            })
        };
        if bytes(path) != bytes(r.key_file) {
            return Err(format!(
                "with --remote, --psk-file must hold the agent's key ({} differs from {}): the servers there bind \
                 with the key the agent holds",
                path.display(),
                r.key_file.display()
            ));
        }
    }
    let started = Instant::now();
    let (remote, there) = match remote {
        Some(r) => {
            let (end, machine) = connect_remote(r)?;
            (Some(end), Some((r.agent.to_string(), machine)))
        }
        None => (None, None),
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
    let mut machine = facts::describe(remote.as_ref().and_then(|r| r.iface.as_deref()));
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
        saturation: Vec::new(),
        cold: Vec::new(),
        peers: Vec::new(),
        accounting: Vec::new(),
        cdf: Vec::new(),
        size_sweep: Vec::new(),
        remote: None,
    };
    let mut lab = Lab::new(exe, place, scale, progress, psk, remote);
    let sends = experiments::run_all(&mut lab, &mut results, &out);
    lab.progress.finish_and_clear();
    if let Some((agent, machine)) = there {
        // The link's own floor: the udp floor of the ladder, measured across it.
        let link_floor =
            results.ladder.iter().find(|r| r.transport == "udp" && r.size == 32 && r.across_link).and_then(|r| r.floor);
        results.remote = Some(RemoteHost {
            agent,
            machine,
            link_floor,
            local_only: LOCAL_ONLY.iter().map(|s| s.to_string()).collect(),
        });
    }
    // Closing the lease stops whatever the agent still runs for this lab.
    if let Some(r) = lab.remote.take() {
        if let Err(e) = r.agent.close() {
            println!("closing the agent's lease: {e} (its servers stop when the lease lapses)");
        }
    }
    tables::print(&results, &sends);
    println!("the laboratory took {:.0} s", started.elapsed().as_secs_f64());
    write_outputs(&out, &results, &lab.histograms)
}
