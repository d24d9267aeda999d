//! `lowlat agent`: the laboratory's remote half on a second host (the work is
//! `lowlat_lab::agent`'s).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use lowlat::{Server, ServerConfig, SpinPolicy};
use lowlat_lab::agent::{self, Agent, AgentConfig};

/// Serve the laboratory's remote half for `lowlat lab --remote`: on request, it starts this
/// executable as the far ends the laboratory measures against (`lowlat serve` over udp, tcp,
/// onc+udp, onc+tcp, eth and xdp; `lowlat pingpong --serve [--floor]`; the busy server's
/// workload), pinned to its servers' CPU, stops them by PID, and describes its machine (CPU,
/// kernel, and the interface toward the laboratory: driver, link speed, interrupt coalescing).
///
/// It runs nothing else, and only for callers holding its key: a laboratory without it is
/// refused when it binds. Everything a laboratory started is stopped when that laboratory
/// closes its lease or stops renewing it (it went away), and everything when the agent stops
/// (SIGTERM, SIGINT, SIGHUP).
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Where laboratories reach it: tcp://HOST:PORT (port 0 picks a free one; the default
    /// port of `lab --remote` is 7460). Its servers bind to HOST too, on free ports.
    listen: String,
    /// The pre-shared key a laboratory must hold (`lab --remote --agent-key` with the same
    /// file); the agent's servers bind with it when the laboratory runs with --psk-file.
    /// At least 16 bytes: `head -c 32 /dev/urandom > FILE`.
    #[arg(long, value_name = "FILE")]
    psk_file: PathBuf,
    /// The interface eth:// and xdp:// servers use (default: the one holding LISTEN's
    /// address, when it names one).
    #[arg(long, value_name = "IFACE")]
    iface: Option<String>,
    /// Pin the servers to this CPU (default: CPU 1 when there are two or more).
    #[arg(long)]
    cpu: Option<usize>,
    /// Seconds a laboratory's servers outlive its last renewal (it renews four times per
    /// lease while it runs).
    #[arg(long, default_value_t = 10.0)]
    lease: f64,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let Args { listen, psk_file, iface, cpu, lease } = args;
    let key = lowlat::read_psk_file(&psk_file).map_err(|e| e.to_string())?;
    let addr: SocketAddr = listen
        .strip_prefix("tcp://")
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| format!("{listen}: the agent listens on tcp://HOST:PORT, HOST an IP address"))?;
    if !(0.5..=3600.0).contains(&lease) {
        return Err(format!("--lease {lease}: give 0.5 to 3600 seconds"));
    }
    let iface = iface.or_else(|| match addr.ip() {
        IpAddr::V4(a) if !a.is_unspecified() => lowlat_sys::iface::interface_with_address(a).ok().flatten(),
        _ => None,
    });
    if let Some(i) = &iface {
        lowlat_sys::interface(i).map_err(|e| format!("--iface {i}: {e}"))?;
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the lowlat executable: {e}"))?;
    let agent = Agent::start(AgentConfig {
        exe,
        key_file: std::fs::canonicalize(&psk_file).map_err(|e| format!("{}: {e}", psk_file.display()))?,
        host: addr.ip(),
        iface,
        cpu: cpu.or(lowlat_lab::ladder::Placement::detect().server_cpu),
        lease: Duration::from_secs_f64(lease),
    });
    let cfg = ServerConfig {
        psk: Some(key),
        // Control traffic only: it must not take CPU time from the servers it starts.
        spin: SpinPolicy::Block,
        ..ServerConfig::default()
    };
    // Before any serving thread starts, so that all of them inherit the mask.
    Server::block_stop_signals().map_err(|e| format!("cannot block termination signals: {e}"))?;
    let server = Server::builder()
        .program(agent::serve::program(agent.clone()))
        .config(cfg)
        .serve(&[listen.as_str()])
        .map_err(|e| e.to_string())?;
    for u in server.local_uris() {
        println!("serving {u}");
    }
    println!("ready");
    let served = server.wait_for_signal().map(|_| ()).map_err(|e| e.to_string());
    // Every child stopped, by PID, before the agent goes.
    agent.shutdown();
    served
}
