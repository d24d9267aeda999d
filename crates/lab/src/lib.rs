//! lowlat's latency laboratory: the built-in `lab` interface, raw ping-pong baselines, closed- and
//! open-loop benchmarks recorded in HdrHistograms, and the `lab` run that puts them side by side.
//!
//! Depends on the runtime and the transports; nothing depends on it but the command line.

pub mod bench;
pub mod interface;
pub mod ladder;
pub mod pingpong;
pub mod procs;
pub mod stats;

use std::path::Path;

use lowlat::SpinPolicy;

/// Runs the laboratory and prints its tables; with `out`, writes `results.json` there too.
pub fn run_lab(quick: bool, out: Option<&Path>) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the lowlat executable: {e}"))?;
    let place = ladder::Placement::detect();
    let calls = if quick { 20_000 } else { 100_000 };
    let sizes: &[usize] = if quick { &[32] } else { &[32, 1024] };
    println!(
        "lowlat lab{}: server {} / client {}; {calls} calls per figure\n",
        if quick { " --quick" } else { "" },
        place.server_cpu.map_or("unpinned".to_string(), |c| format!("on CPU {c}")),
        place.client_cpu.map_or("unpinned".to_string(), |c| format!("on CPU {c}")),
    );
    let mut rungs = Vec::new();
    for scheme in ["udp", "tcp"] {
        for spin in [SpinPolicy::Forever, SpinPolicy::Block] {
            for &size in sizes {
                match ladder::rung(&exe, scheme, spin, size, calls, &place) {
                    Ok(r) => rungs.push(r),
                    Err(e) => println!("skipped {scheme} {}: {e}", ladder::mode_name(spin)),
                }
            }
        }
    }
    println!("The ladder: raw ping-pong vs lowlat null call\n{}", ladder::table(&rungs));
    if let Some(dir) = out {
        std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        let path = dir.join("results.json");
        let json = serde_json::to_string_pretty(&serde_json::json!({ "ladder": rungs })).map_err(|e| e.to_string())?;
        std::fs::write(&path, json).map_err(|e| format!("write {}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
