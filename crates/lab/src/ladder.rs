//! The ladder: for each transport and waiting mode, the raw ping-pong floor beside lowlat's null
//! call, measured in one run, as a ratio and a difference (Bjørndalen et al. Tables 1 and 3;
//! Thekkath & Levy Tables I and II).

use std::path::Path;
use std::time::Duration;

use lowlat::SpinPolicy;
use serde::Serialize;

use crate::bench::{self, BenchSpec};
use crate::latency::{us, Summary};
use crate::procs;

/// One row: a transport in one waiting mode.
#[derive(Clone, Debug, Serialize)]
pub struct Rung {
    /// Transport scheme (udp, tcp, ...).
    pub transport: String,
    /// Waiting mode, as named by [`mode_name`].
    pub mode: String,
    /// Bytes exchanged by the raw ping-pong; 32 = a null call's header (the RPC is then `null`,
    /// otherwise `echo` of this many bytes).
    pub size: usize,
    /// The raw ping-pong over the transport alone: the floor.
    pub raw: Summary,
    /// The RPC through lowlat over the same transport and mode.
    pub rpc: Summary,
    /// RPC median over raw median (raw clamped to at least 1 ns).
    pub ratio_p50: f64,
    /// RPC median minus raw median, ns (negative if the RPC was faster).
    pub diff_p50_ns: i64,
}

/// Where the lab's servers run and callers sit.
#[derive(Clone, Debug)]
pub struct Placement {
    /// CPU the servers are pinned to; `None` = unpinned.
    pub server_cpu: Option<usize>,
    /// CPU the calling thread is pinned to; `None` = unpinned.
    pub client_cpu: Option<usize>,
}

impl Placement {
    /// Server on CPU 1 and client on CPU 0 when there are two CPUs; unpinned otherwise.
    pub fn detect() -> Placement {
        if lowlat_sys::available_cpus() >= 2 {
            Placement { server_cpu: Some(1), client_cpu: Some(0) }
        } else {
            Placement { server_cpu: None, client_cpu: None }
        }
    }
}

/// The name of a spin policy's waiting mode in tables and JSON: busy-poll, blocking, adaptive,
/// or spin-then-block (any spin budget).
pub fn mode_name(spin: SpinPolicy) -> &'static str {
    match spin {
        SpinPolicy::Forever => "busy-poll",
        SpinPolicy::Block => "blocking",
        SpinPolicy::Adaptive => "adaptive",
        SpinPolicy::Budget(_) => "spin-then-block",
    }
}

fn server_args(cmd: &[&str], uri: &str, spin: SpinPolicy, cpu: Option<usize>) -> Vec<String> {
    let mut a: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
    a.push(uri.to_string());
    a.push("--spin-us".into());
    a.push(spin.to_string());
    if let Some(c) = cpu {
        a.push("--cpu".into());
        a.push(c.to_string());
    }
    a
}

/// Measures one rung: raw ping-pong of `size` bytes (32 = the RPC header of a null call) and the
/// RPC (`null` at 32, `echo` of `size` bytes otherwise), against servers in child processes.
pub fn rung(
    exe: &Path,
    scheme: &str,
    spin: SpinPolicy,
    size: usize,
    calls: u64,
    place: &Placement,
) -> Result<Rung, String> {
    let bind = format!("{scheme}://127.0.0.1:0");
    let ready = Duration::from_secs(10);
    let pp = procs::spawn(exe, &server_args(&["pingpong", "--serve"], &bind, spin, place.server_cpu), ready)
        .map_err(|e| e.to_string())?;
    let pp_uri = pp.uris.first().cloned().ok_or("pingpong server printed no URI")?;
    let rpc_srv =
        procs::spawn(exe, &server_args(&["serve"], &bind, spin, place.server_cpu), ready).map_err(|e| e.to_string())?;
    let rpc_uri = rpc_srv.uris.first().cloned().ok_or("server printed no URI")?;
    if let Some(c) = place.client_cpu {
        let _ = lowlat_sys::pin_to_cpu(c);
    }
    let warmup = (calls / 10).max(100);
    let (raw, _) =
        bench::run_raw(&pp_uri, size, calls, warmup, spin, Default::default(), None).map_err(|e| e.to_string())?;
    drop(pp);
    let (proc, psize) = if size <= 32 { ("null", 0) } else { ("echo", size) };
    let rpc = bench::run(&BenchSpec {
        uri: rpc_uri,
        proc: proc.into(),
        size: psize,
        calls,
        warmup,
        threads: 1,
        spin,
        cpu: place.client_cpu,
        ..BenchSpec::default()
    })
    .map_err(|e| e.to_string())?;
    drop(rpc_srv);
    Ok(Rung {
        transport: scheme.into(),
        mode: mode_name(spin).into(),
        size,
        ratio_p50: rpc.p50_ns as f64 / raw.p50_ns.max(1) as f64,
        diff_p50_ns: rpc.p50_ns as i64 - raw.p50_ns as i64,
        raw,
        rpc,
    })
}

/// The ladder as a terminal table.
pub fn table(rungs: &[Rung]) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:<10} {:<10} {:>6} | {:>9} {:>9} | {:>9} {:>9} | {:>7} {:>9}\n",
        "transport", "mode", "bytes", "raw p50", "raw p99", "rpc p50", "rpc p99", "rpc/raw", "diff p50"
    ));
    s.push_str(&format!("{}\n", "-".repeat(98)));
    for r in rungs {
        s.push_str(&format!(
            "{:<10} {:<10} {:>6} | {:>9} {:>9} | {:>9} {:>9} | {:>6.2}x {:>9}\n",
            r.transport,
            r.mode,
            r.size,
            us(r.raw.p50_ns),
            us(r.raw.p99_ns),
            us(r.rpc.p50_ns),
            us(r.rpc.p99_ns),
            r.ratio_p50,
            format!("{:+.2}", r.diff_p50_ns as f64 / 1000.0),
        ));
    }
    s.push_str("(microseconds; raw = the same exchange with no RPC layer, size 32 = a null call's header)\n");
    s
}
