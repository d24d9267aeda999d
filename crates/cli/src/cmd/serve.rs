//! `lowlat serve`: the built-in `lab` interface on each endpoint, until a termination signal.

use lowlat::{Cidr, Server, ServerConfig, SpinPolicy};
use lowlat_lab::interface;

use crate::key::KeyArgs;

/// Serve the built-in `lab` interface (program 0x20004C4C version 1) on each URI.
///
/// SIGTERM, SIGINT or SIGHUP stop the server gracefully (calls in progress answered). SIGUSR1
/// makes it shed load: every new call is answered Busy without running (a client over several
/// servers sends it to another), until SIGUSR2 makes it take calls again.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Endpoints: udp://HOST:PORT, tcp://HOST:PORT (port 0 picks a free one).
    #[arg(required = true)]
    uris: Vec<String>,
    /// Spin budget in µs before blocking (0 = always block, `forever` = busy-poll, `adaptive`);
    /// none while an endpoint's calls fill the worker pool.
    #[arg(long, default_value = "adaptive")]
    spin_us: SpinPolicy,
    /// Pin the serving threads to these CPUs (e.g. 1 or 2,3): thread i of each endpoint to the
    /// i-th, round the list. The worker threads are not pinned.
    #[arg(long, value_delimiter = ',', value_name = "CPU")]
    cpu: Vec<usize>,
    /// Threads serving each endpoint (xdp: 1 only): each holds the sessions steered to it and
    /// runs their calls.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=lowlat::MAX_SERVING_THREADS as u64))]
    threads: u64,
    /// Threads for long-running procedures.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Long-running calls queued for the workers; calls beyond are answered Busy at once.
    #[arg(long, default_value_t = 1024)]
    worker_queue: usize,
    /// Sessions at once per endpoint.
    #[arg(long, default_value_t = 1024)]
    max_sessions: usize,
    /// Sessions one source holds at once (an IP address over udp, a MAC over eth/xdp).
    #[arg(long, default_value_t = 128)]
    max_sessions_per_source: usize,
    /// Serve only sources in this block (udp, tcp, onc+udp, onc+tcp), e.g. 10.0.0.0/8 or
    /// ::1; repeat for more. Others are dropped silently, unread.
    #[arg(long, value_name = "CIDR")]
    allow: Vec<Cidr>,
    /// ONC RPC: refuse callers without AUTH_SYS credentials (AUTH_ERROR, AUTH_TOOWEAK).
    #[arg(long)]
    onc_auth_sys: bool,
    /// ONC RPC: accept AUTH_SYS callers with this uid only (repeat for more; implies
    /// --onc-auth-sys); others get AUTH_ERROR, AUTH_TOOWEAK.
    #[arg(long, value_name = "UID")]
    onc_uid: Vec<u32>,
    #[command(flatten)]
    key: KeyArgs,
    /// Largest message in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    max_message: usize,
    /// Note the moments of every call and serve them to `lowlat account` (trace program
    /// 0x20004C4D).
    #[arg(long)]
    trace: bool,
    /// udp://, eth:// and xdp://: no end-to-end CRC32C on lowlat's frames (both ends must
    /// agree).
    #[arg(long)]
    no_checksum: bool,
    /// Serve every endpoint's counters and calls' times for Prometheus at
    /// http://ADDR/metrics (OpenMetrics text), e.g. 127.0.0.1:9464 (port 0 picks a free one).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// `COUNT` starts after N (so that several servers return disjoint values: tests).
    #[arg(long, default_value_t = 0, hide = true)]
    count_from: u64,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let Args {
        uris,
        spin_us,
        cpu,
        threads,
        workers,
        worker_queue,
        max_sessions,
        max_sessions_per_source,
        allow,
        onc_auth_sys,
        onc_uid,
        key,
        max_message,
        trace,
        no_checksum,
        metrics,
        count_from,
    } = args;
    let psk = key.load()?;
    let cfg = ServerConfig {
        spin: spin_us,
        pin_cpus: cpu,
        threads: threads as usize,
        workers,
        worker_queue,
        max_sessions,
        max_sessions_per_source,
        allow,
        onc_require_auth_sys: onc_auth_sys || !onc_uid.is_empty(),
        onc_allowed_uids: onc_uid,
        psk,
        encrypt: key.encrypt,
        max_message,
        trace,
        checksum: !no_checksum,
        ..ServerConfig::default()
    };
    // Native bodies for lowlat's own transports, XDR for onc+udp:// and onc+tcp://, with
    // one COUNT counter between them.
    let [native, xdr] = interface::programs_counting_from(count_from);
    let mut builder = Server::builder().program(native).program(xdr).config(cfg);
    if trace {
        builder = builder.program(interface::trace_program());
    }
    if let Some(addr) = metrics {
        builder = builder.metrics(addr);
    }
    // Before any serving thread starts, so that all of them inherit the mask.
    Server::block_stop_signals().map_err(|e| format!("cannot block termination signals: {e}"))?;
    let server = builder.serve(&uris).map_err(|e| e.to_string())?;
    for u in server.local_uris() {
        println!("serving {u}");
    }
    if let Some(addr) = server.metrics_addr() {
        println!("metrics http://{addr}/metrics");
    }
    println!("ready");
    // SIGTERM, SIGINT or SIGHUP: stop gracefully (calls in progress answered, socket
    // files removed, rpcbind told); SIGUSR1 and SIGUSR2: shed load, take calls again.
    server.wait_for_signal().map(|_| ()).map_err(|e| e.to_string())
}
