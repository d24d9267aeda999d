//! `lowlat pingpong`: the exchange with no RPC layer, as the echo server or the client, over
//! lowlat's transport or the machine's floor.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lowlat::{Psk, SpinPolicy};
use lowlat_lab::bench;
use lowlat_lab::pingpong::{run_pipelined, PingPongServer, PipelineOptions, RawOptions};

use crate::key::KeyArgs;
use crate::measure::{pin, print_summary};

/// The same exchange with no RPC layer, over lowlat's transport or (`--floor`) the simplest
/// one the machine allows (`--serve` for the echo side).
#[derive(clap::Args)]
pub(crate) struct Args {
    uri: String,
    /// Run the echo server instead of the client.
    #[arg(long)]
    serve: bool,
    /// The machine's floor for the path instead of lowlat's transport (both sides say it):
    /// shm://, one message each way through cache lines, its sequence word written last, both
    /// sides spinning (no ring; sizes a multiple of 8); udp://, two connected sockets (the
    /// echo server connects to its first client); eth:// and xdp://, lowlat's XDP echo
    /// program attached to the interface, answering PING frames in the driver (give the
    /// server's MAC: eth://IFACE/MAC).
    #[arg(long)]
    floor: bool,
    /// eth:// and xdp:// only: no end-to-end CRC32C on frames (both ends must agree).
    #[arg(long)]
    no_checksum: bool,
    /// Keep up to W messages in flight (1 to 4096) and report throughput instead of latency:
    /// exchanges per second and the CPU each side spends per exchange (the server's read from
    /// its serving thread's clock). With --floor: shm://, rings of one-line records, data then
    /// flag (sizes a multiple of 8 up to 64); udp://, a connected socket sending with sendmmsg
    /// against an echo with recvmmsg/sendmmsg in batches of 32. Without: lowlat's shm://,
    /// udp:// and tcp:// transports with no RPC on them. --calls counts the measured exchanges.
    /// Over udp a message unanswered for 50 ms is counted lost. Without the flag, one message at
    /// a time and its latency, as before.
    #[arg(long, value_name = "W")]
    in_flight: Option<usize>,
    /// Bytes per message (32 = the size of a null call's header).
    #[arg(long, default_value_t = 32)]
    size: usize,
    #[arg(long, default_value_t = 100_000)]
    calls: u64,
    #[arg(long, default_value_t = 2_000)]
    warmup: u64,
    #[arg(long, default_value = "adaptive")]
    spin_us: SpinPolicy,
    #[arg(long)]
    cpu: Option<usize>,
    #[arg(long)]
    json: bool,
    /// udp:// and tcp:// only: tag every message as a keyed session tags its frames (both
    /// ends need the same file): the floor of an authenticated exchange.
    #[command(flatten)]
    key: KeyArgs,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let Args { uri, serve, floor, no_checksum, in_flight, size, calls, warmup, spin_us, cpu, json, key } = args;
    if key.encrypt {
        return Err(
            "--encrypt applies to serve, call, bench and stat: a ping-pong carries no RPC frames to encrypt".into()
        );
    }
    pin(cpu)?;
    let psk = key.load()?;
    if serve {
        return echo(&uri, floor, spin_us, !no_checksum, psk.as_ref());
    }
    if let Some(w) = in_flight {
        if psk.is_some() {
            return Err("--in-flight runs without a pre-shared key: its messages carry no tags".into());
        }
        let opts = PipelineOptions { floor, warmup, ..Default::default() };
        let t = run_pipelined(&uri, size, calls, w, opts).map_err(|e| e.to_string())?;
        if json {
            println!("{}", t.json());
        } else {
            println!("{t}");
        }
        return Ok(());
    }
    let (s, _) =
        bench::run_raw(&uri, size, calls, warmup, spin_us, RawOptions { floor, checksum: !no_checksum }, psk.as_ref())
            .map_err(|e| e.to_string())?;
    print_summary(&s, json);
    Ok(())
}

/// The echo side, until a termination signal.
fn echo(uri: &str, floor: bool, spin: SpinPolicy, checksum: bool, psk: Option<&Psk>) -> Result<(), String> {
    let bound =
        if floor { PingPongServer::bind_floor(uri, spin) } else { PingPongServer::bind(uri, spin, checksum, psk) };
    let server = bound.map_err(|e| e.to_string())?;
    lowlat_sys::block_server_signals().map_err(|e| format!("cannot block termination signals: {e}"))?;
    println!("serving {}", server.local_uri);
    println!("ready");
    // Echo on a thread; this one stops it on SIGTERM, SIGINT or SIGHUP, so that the
    // echo server removes its socket file or detaches its XDP program.
    let stop = Arc::new(AtomicBool::new(false));
    let echo = {
        let stop = stop.clone();
        std::thread::spawn(move || server.run(&stop))
    };
    while !echo.is_finished() {
        if lowlat_sys::wait_termination(Duration::from_millis(200)).is_some() {
            stop.store(true, Ordering::Relaxed);
        }
    }
    match echo.join() {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the echo server panicked".into()),
    }
}
