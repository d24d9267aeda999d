//! The `lowlat` command: serve, call, benchmark, measure the floor, run the laboratory.

// The doc comments of the argument structs are the command's help text (clap), where `[JSON]`
// means an optional argument, not a link.
#![allow(rustdoc::broken_intra_doc_links)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use lowlat::{Cidr, ClientConfig, Psk, Server, ServerConfig, SpinPolicy};
use lowlat_lab::bench::{self, BenchSpec};
use lowlat_lab::interface::{self, LabClient};
use lowlat_lab::stats;

#[derive(Parser)]
#[command(
    name = "lowlat",
    version,
    about = "Low-latency RPC for Linux, and a laboratory that shows where every microsecond goes"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// `--psk-file`, as every command that binds or serves takes it.
#[derive(Args, Clone, Debug, Default)]
struct KeyArgs {
    /// A pre-shared key (the file's bytes, less a trailing newline; at least 16): binds must
    /// prove it and every frame carries a tag under it (udp, tcp, eth, xdp; not shm, not ONC
    /// RPC). Both ends need the same file. Make one with `head -c 32 /dev/urandom > FILE`.
    #[arg(long, value_name = "FILE")]
    psk_file: Option<PathBuf>,
    /// With --psk-file (serve, call, bench, stat): encrypt the body of every frame after the
    /// bind as well (AES-256-GCM where the CPU has AES instructions, else ChaCha20-Poly1305).
    /// A server with it refuses clients without it. Not over shm:// or ONC RPC.
    #[arg(long, requires = "psk_file")]
    encrypt: bool,
}

impl KeyArgs {
    fn load(&self) -> Result<Option<Psk>, String> {
        self.psk_file.as_deref().map(lowlat::read_psk_file).transpose().map_err(|e| e.to_string())
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the built-in `lab` interface (program 0x20004C4C version 1) on each URI.
    Serve {
        /// Endpoints: udp://HOST:PORT, tcp://HOST:PORT (port 0 picks a free one).
        #[arg(required = true)]
        uris: Vec<String>,
        /// Spin budget in µs before blocking (0 = always block, `forever` = busy-poll, `adaptive`);
        /// none while an endpoint's calls fill the worker pool.
        #[arg(long, default_value = "adaptive")]
        spin_us: SpinPolicy,
        /// Pin the serving threads to this CPU.
        #[arg(long)]
        cpu: Option<usize>,
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
    },
    /// Where the time of a null call goes, part by part, and whether the parts predict the whole.
    ///
    /// Starts its own servers on this host at URI, one after the other (port 0 picks a free
    /// port), pinned when there are two CPUs: a traced one, a plain one for the untraced call,
    /// lowlat's ping-pong server and, for shm:// and udp://, the machine's floor, which the
    /// untraced call is then set against, layer by layer. The floor is measured before and
    /// after the untraced call and the ping-pong; while the two disagree (a virtual machine's
    /// host moved its CPUs) the three are measured again, up to three times, and then no
    /// comparison is made.
    Account {
        /// Transport and address to serve on, e.g. udp://127.0.0.1:0, tcp://127.0.0.1:0, shm:///tmp/acct.sock
        uri: String,
        #[arg(long, default_value_t = 20_000)]
        calls: u64,
        #[arg(long, default_value = "adaptive")]
        spin_us: SpinPolicy,
        /// Print the accounting as JSON (the results.json `accounting` entry).
        #[arg(long)]
        json: bool,
    },
    /// Make one call of a lab procedure and print the result; or, with --idl, of any procedure
    /// of any interface, the argument and result as JSON (docs/json-mapping.md).
    ///
    /// Procedures: null; minus A B; maxarg SIZE; maxresult N; echo TEXT.
    /// With --idl FILE.x: URI PROC [JSON], PROC as NAME, VERSION.NAME or PROGRAM.VERSION.NAME;
    /// --list shows every program, version and procedure with its types.
    Call {
        #[arg(required_unless_present = "list")]
        uri: Option<String>,
        /// null, minus, maxarg, maxresult or echo (or a procedure number); with --idl, a
        /// procedure of that interface.
        #[arg(required_unless_present = "list")]
        proc: Option<String>,
        args: Vec<String>,
        /// An interface definition (.x): call any of its procedures with a JSON argument.
        #[arg(long)]
        idl: Option<std::path::PathBuf>,
        /// With --idl: list the programs, versions and procedures, with their types.
        #[arg(long, requires = "idl")]
        list: bool,
        /// Deadline of the call in milliseconds.
        #[arg(long, default_value_t = 5000)]
        timeout_ms: u64,
        #[arg(long, default_value = "adaptive")]
        spin_us: SpinPolicy,
        #[command(flatten)]
        key: KeyArgs,
    },
    /// A running server's counters, read from the endpoint at URI through its built-in stats
    /// program (0x20004C4E, behind the same binding and key as every other program): sessions,
    /// binds granted and refused by cause, cookies, calls, procedures executed, duplicates,
    /// retransmissions, busy, errors by code, bytes, checksum and MAC failures.
    ///
    /// The figures include the binding and the call that read them.
    Stat {
        uri: String,
        /// Print one JSON object (with --watch: one a second).
        #[arg(long)]
        json: bool,
        /// Print rates every second (per second, but `sessions_open`, which is a level) until
        /// interrupted.
        #[arg(long)]
        watch: bool,
        /// With --watch: stop after this many seconds.
        #[arg(long)]
        count: Option<u64>,
        #[arg(long, default_value_t = 5000)]
        timeout_ms: u64,
        #[command(flatten)]
        key: KeyArgs,
    },
    /// Closed-loop (or, with --rate, open-loop) benchmark of a lab procedure.
    Bench {
        uri: String,
        #[arg(long, default_value = "null")]
        proc: String,
        /// Payload bytes (maxarg, maxresult, echo); microseconds of work per call (spin).
        #[arg(long, default_value_t = 0)]
        size: usize,
        /// Measured calls over all threads.
        #[arg(long, default_value_t = 100_000)]
        calls: u64,
        /// Unmeasured calls per thread first.
        #[arg(long, default_value_t = 2_000)]
        warmup: u64,
        /// Calling threads (closed loop); sending threads, each with many calls in flight (open
        /// loop).
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Offered calls per second, open loop: Poisson arrivals sent on schedule whatever the
        /// replies do (async calls, many in flight per sending thread), latency from each
        /// call's scheduled time; prints the generator's own lag and the Busy count. With
        /// --spin-us 0 the senders also sleep until each send is due (less CPU, later sends).
        #[arg(long)]
        rate: Option<f64>,
        /// Open loop: the most calls in flight at once (default: enough for replies of up to
        /// 1 ms at --rate, 9 to 64); a call due while they are all out is sent late.
        #[arg(long, requires = "rate")]
        in_flight: Option<usize>,
        #[arg(long, default_value = "adaptive")]
        spin_us: SpinPolicy,
        /// Pin the calling threads to this CPU.
        #[arg(long)]
        cpu: Option<usize>,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// udp://, eth:// and xdp://: no end-to-end CRC32C on lowlat's frames (both ends must
        /// agree).
        #[arg(long)]
        no_checksum: bool,
        #[command(flatten)]
        key: KeyArgs,
    },
    /// The same exchange with no RPC layer, over lowlat's transport or (`--floor`) the simplest
    /// one the machine allows (`--serve` for the echo side).
    Pingpong {
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
    },
    /// A fault-injecting relay to put between a client and its server over datagrams: drops,
    /// duplicates, reorders, delays and corrupts what passes, both ways, and says at exit
    /// (SIGINT, SIGTERM) what it did.
    ///
    /// Clients call the relay's address (printed as `serving URI`) instead of the server's.
    /// Probabilities as 0.05 or 5%; delays as 0, 200us (fixed), 100us-2ms (uniform) or exp:300us
    /// (exponential with that mean).
    Relay {
        /// Where clients send: udp://HOST:PORT or onc+udp://HOST:PORT (port 0 picks one).
        listen: String,
        /// The server: udp://HOST:PORT or onc+udp://HOST:PORT.
        target: String,
        #[arg(long, default_value = "0")]
        drop: lowlat_relay::Probability,
        #[arg(long, default_value = "0")]
        dup: lowlat_relay::Probability,
        #[arg(long, default_value = "0")]
        reorder: lowlat_relay::Probability,
        #[arg(long, default_value = "0")]
        corrupt: lowlat_relay::Probability,
        #[arg(long, default_value = "0")]
        delay: lowlat_relay::Delay,
        /// Seed of the faults (the same seed and traffic do the same things); random if absent,
        /// and printed.
        #[arg(long)]
        seed: Option<u64>,
        /// Print what it did as one JSON object at exit.
        #[arg(long)]
        json: bool,
    },
    /// The busy-server workload (a tiled matrix multiplication) for SECONDS; prints units done.
    #[command(hide = true)]
    Workload {
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        #[arg(long)]
        cpu: Option<usize>,
    },
    /// Compile an interface definition (the ONC RPC language, a .x file) into stubs.
    Gen {
        /// The .x file.
        file: PathBuf,
        /// Target language: rust, or c (a .h and a .c over liblowlat).
        #[arg(long, default_value = "rust")]
        lang: String,
        /// Directory to write the generated files into (created if missing).
        #[arg(long, default_value = ".")]
        out: PathBuf,
    },
    /// The laboratory: every transport's floor beside lowlat's calls, on this machine.
    Lab {
        /// The short run (about a minute).
        #[arg(long)]
        quick: bool,
        /// Write results.json here as well.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Every lowlat server and caller of the run binds with this key (the raw floors do
        /// not: a floor is the machine's).
        #[command(flatten)]
        key: KeyArgs,
    },
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("lowlat: {msg}");
    ExitCode::FAILURE
}

fn pin(cpu: Option<usize>) -> Result<(), String> {
    if let Some(c) = cpu {
        lowlat_sys::pin_to_cpu(c).map_err(|e| format!("cannot pin to CPU {c}: {e}"))?;
    }
    Ok(())
}

fn print_summary(s: &stats::Summary, json: bool) {
    if json {
        println!("{}", s.to_json());
    } else {
        println!(
            "{} {} {} size={} threads={} spin={}: p50 {} µs, p90 {} µs, p99 {} µs, p99.9 {} µs, max {} µs, mean {} µs; {:.0} calls/s, {:.1} Mbit/s{}",
            s.kind,
            s.transport,
            s.proc,
            s.size,
            s.threads,
            s.spin,
            stats::us(s.p50_ns),
            stats::us(s.p90_ns),
            stats::us(s.p99_ns),
            stats::us(s.p999_ns),
            stats::us(s.max_ns),
            stats::us(s.mean_ns),
            s.calls_per_s,
            s.mbit_s,
            if s.errors > 0 { format!(", {} errors", s.errors) } else { String::new() }
        );
    }
}

fn call(
    uri: &str,
    proc: &str,
    args: &[String],
    timeout_ms: u64,
    spin: SpinPolicy,
    psk: Option<Psk>,
    encrypt: bool,
) -> Result<(), String> {
    let cfg =
        ClientConfig { spin, deadline: Duration::from_millis(timeout_ms), psk, encrypt, ..ClientConfig::default() };
    let p = interface::procedure_number(proc).ok_or_else(|| {
        format!("unknown procedure {proc:?}; expected null, minus, maxarg, maxresult, echo, count or spin")
    })?;
    let arg =
        |i: usize, what: &str| -> Result<&String, String> { args.get(i).ok_or_else(|| format!("{proc} needs {what}")) };
    let num = |i: usize, what: &str| -> Result<i64, String> {
        let a = arg(i, what)?;
        a.parse::<i64>().map_err(|_| format!("{what}: {a:?} is not a number"))
    };
    let c = LabClient::connect(uri, cfg).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    match p {
        interface::NULL => {
            c.null().map_err(|e| e.to_string())?;
            println!("null: ok");
        }
        interface::MINUS => {
            let a = i32::try_from(num(0, "two integers A B")?).map_err(|_| "A does not fit in 32 bits")?;
            let b = i32::try_from(num(1, "two integers A B")?).map_err(|_| "B does not fit in 32 bits")?;
            println!("{}", c.minus(a, b).map_err(|e| e.to_string())?);
        }
        interface::MAXARG => {
            let n = usize::try_from(num(0, "a size in bytes")?).map_err(|_| "size must not be negative")?;
            c.maxarg(&vec![0x5a; n]).map_err(|e| e.to_string())?;
            println!("maxarg: sent {n} bytes");
        }
        interface::MAXRESULT => {
            let n = u32::try_from(num(0, "a size in bytes")?).map_err(|_| "size must be 0 to 4294967295")?;
            c.maxresult(n, &mut out).map_err(|e| e.to_string())?;
            println!("maxresult: received {} bytes", out.len());
        }
        interface::ECHO => {
            let text = args.join(" ");
            c.echo(text.as_bytes(), &mut out).map_err(|e| e.to_string())?;
            println!("{}", String::from_utf8_lossy(&out));
        }
        interface::COUNT => println!("{}", c.count().map_err(|e| e.to_string())?),
        interface::SPIN => {
            let us = u32::try_from(num(0, "microseconds")?).map_err(|_| "microseconds must be 0 to 4294967295")?;
            c.spin(us).map_err(|e| e.to_string())?;
            println!("spin: {us} us");
        }
        other => {
            // A procedure the lab interface lacks: the server's answer tells the user so.
            let r: Result<(), _> = c.client().call(other, |_| Ok::<_, lowlat::DecodeError>(()), |_| Ok(()));
            r.map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Reads the counters of the endpoint `client` is bound to.
fn read_stats(client: &lowlat::Client) -> Result<Vec<(String, u64)>, String> {
    let text = client
        .call::<_, lowlat::DecodeError>(
            lowlat::stats::STATS,
            |_| Ok(()),
            |r| Ok(String::from_utf8_lossy(r).into_owned()),
        )
        .map_err(|e| e.to_string())?;
    Ok(lowlat::stats::parse_text(&text))
}

/// `lowlat stat`: the counters once, or (watching) their rates every second.
fn stat(
    uri: &str,
    json: bool,
    watch: bool,
    count: Option<u64>,
    timeout_ms: u64,
    psk: Option<Psk>,
    encrypt: bool,
) -> Result<(), String> {
    // Patient retransmission: the answer takes a hop to a worker, and a reading that resends
    // would disturb the counters it reads (lost datagrams are all it must recover).
    let engine = lowlat_proto::ClientEngineConfig {
        initial_rto: Duration::from_millis(500),
        min_rto: Duration::from_millis(100),
        ..lowlat_proto::ClientEngineConfig::default()
    };
    let cfg = ClientConfig {
        deadline: Duration::from_millis(timeout_ms),
        psk,
        encrypt,
        slots: 1,
        engine,
        ..ClientConfig::default()
    };
    let client = lowlat::Client::connect_with(uri, lowlat::stats::PROGRAM, 1, cfg).map_err(|e| e.to_string())?;
    let first = read_stats(&client)?;
    if !watch {
        if json {
            let mut o = serde_json::Map::new();
            o.insert("uri".into(), uri.into());
            for (k, v) in first {
                o.insert(k, v.into());
            }
            println!("{}", serde_json::Value::Object(o));
        } else {
            let width = first.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
            for (k, v) in first {
                println!("{k:width$}  {v}");
            }
        }
        return Ok(());
    }
    lowlat_sys::block_termination_signals().map_err(|e| format!("cannot block termination signals: {e}"))?;
    // The counters a person watches, as rates (and the one level among them).
    const SHOWN: [&str; 10] = [
        "sessions_open",
        "binds_granted",
        "binds_refused",
        "calls",
        "executed",
        "duplicates",
        "retransmits_received",
        "busy",
        "mac_failures",
        "bytes_in",
    ];
    let mut before = (std::time::Instant::now(), first);
    if !json {
        println!("{}", SHOWN.iter().map(|k| format!("{:>14}", k.trim_end_matches("_received"))).collect::<String>());
    }
    for _ in 0..count.unwrap_or(u64::MAX) {
        if lowlat_sys::wait_termination(Duration::from_secs(1)).is_some() {
            break;
        }
        let now = (std::time::Instant::now(), read_stats(&client)?);
        let secs = (now.0 - before.0).as_secs_f64().max(1e-9);
        let old = |k: &str| before.1.iter().find(|(n, _)| n == k).map_or(0, |(_, v)| *v);
        let rate =
            |k: &str, v: u64| if k == "sessions_open" { v as f64 } else { v.saturating_sub(old(k)) as f64 / secs };
        if json {
            let mut o = serde_json::Map::new();
            o.insert("uri".into(), uri.into());
            o.insert("interval_s".into(), secs.into());
            for (k, v) in &now.1 {
                o.insert(k.clone(), rate(k, *v).into());
            }
            println!("{}", serde_json::Value::Object(o));
        } else {
            let value = |k: &str| now.1.iter().find(|(n, _)| n == k).map_or(0.0, |(_, v)| rate(k, *v));
            println!("{}", SHOWN.iter().map(|k| format!("{:>14.0}", value(k))).collect::<String>());
        }
        before = now;
    }
    Ok(())
}

/// The address of a datagram endpoint URI, and its scheme.
fn datagram_addr(uri: &str) -> Result<(std::net::SocketAddr, &'static str), String> {
    let endpoint: lowlat::Endpoint = uri.parse().map_err(|e: lowlat_transport::UriError| e.to_string())?;
    let host_port = match &endpoint {
        lowlat::Endpoint::Udp { host_port } => host_port.clone(),
        lowlat::Endpoint::OncUdp { host, port: Some(p) } => format!("{host}:{p}"),
        lowlat::Endpoint::OncUdp { port: None, .. } => {
            return Err(format!("{uri}: give the port (the relay does not ask rpcbind)"))
        }
        other => {
            return Err(format!("{uri}: the relay carries datagrams (udp://, onc+udp://), not {}://", other.scheme()))
        }
    };
    let addr = lowlat_transport::udp::resolve(&host_port).map_err(|e| format!("{uri}: {e}"))?;
    Ok((addr, endpoint.scheme()))
}

fn relay(listen: &str, target: &str, faults: lowlat_relay::Faults, json: bool) -> Result<(), String> {
    let (at, scheme) = datagram_addr(listen)?;
    let (to, _) = datagram_addr(target)?;
    lowlat_sys::block_termination_signals().map_err(|e| format!("cannot block termination signals: {e}"))?;
    let relay = lowlat_relay::RelayThread::start(at, to, faults).map_err(|e| format!("{listen}: {e}"))?;
    println!("serving {scheme}://{}", relay.addr());
    println!(
        "relaying to {target}: drop {}, duplicate {}, reorder {}, corrupt {}, delay {}, seed {}",
        faults.drop, faults.dup, faults.reorder, faults.corrupt, faults.delay, faults.seed
    );
    println!("ready");
    while lowlat_sys::wait_termination(Duration::from_millis(200)).is_none() {}
    let report = relay.stop().map_err(|e| e.to_string())?;
    if json {
        let dir = |s: &lowlat_relay::Stats| {
            serde_json::json!({
                "received": s.received, "sent": s.sent, "dropped": s.dropped, "duplicated": s.duplicated,
                "reordered": s.reordered, "delayed": s.delayed, "corrupted": s.corrupted, "overflow": s.overflow,
            })
        };
        let v = serde_json::json!({
            "clients": report.clients,
            "to_target": dir(&report.to_target),
            "to_clients": dir(&report.to_clients),
            "seed": faults.seed,
        });
        println!("{v}");
    } else {
        print!("{report}");
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Serve {
            uris,
            spin_us,
            cpu,
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
        } => {
            let psk = match key.load() {
                Ok(k) => k,
                Err(e) => return fail(e),
            };
            let cfg = ServerConfig {
                spin: spin_us,
                pin_cpu: cpu,
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
            let [native, xdr] = interface::programs();
            let mut builder = Server::builder().program(native).program(xdr).config(cfg);
            if trace {
                builder = builder.program(interface::trace_program());
            }
            // Before any serving thread starts, so that all of them inherit the mask.
            if let Err(e) = lowlat_sys::block_termination_signals() {
                return fail(format!("cannot block termination signals: {e}"));
            }
            let server = match builder.serve(&uris) {
                Ok(s) => s,
                Err(e) => return fail(e),
            };
            for u in server.local_uris() {
                println!("serving {u}");
            }
            println!("ready");
            // SIGTERM, SIGINT or SIGHUP: stop gracefully (calls in progress answered, socket
            // files removed, rpcbind told).
            match server.wait_for_signal() {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            }
        }
        Cmd::Call { uri, proc, args, idl, list, timeout_ms, spin_us, key } => {
            let psk = match key.load() {
                Ok(k) => k,
                Err(e) => return fail(e),
            };
            let r = match idl {
                Some(idl) => {
                    let cfg = ClientConfig {
                        spin: spin_us,
                        deadline: Duration::from_millis(timeout_ms),
                        psk,
                        encrypt: key.encrypt,
                        ..ClientConfig::default()
                    };
                    let uri = if list { None } else { uri.as_deref() };
                    lowlat_dynamic::cli::run(&idl, uri, proc.as_deref(), &args.join(" "), cfg)
                        .map(|out| print!("{out}"))
                }
                None => call(
                    uri.as_deref().unwrap_or_default(),
                    proc.as_deref().unwrap_or_default(),
                    &args,
                    timeout_ms,
                    spin_us,
                    psk,
                    key.encrypt,
                ),
            };
            match r {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            }
        }
        Cmd::Stat { uri, json, watch, count, timeout_ms, key } => {
            match key.load().and_then(|psk| stat(&uri, json, watch, count, timeout_ms, psk, key.encrypt)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            }
        }
        Cmd::Bench {
            uri,
            proc,
            size,
            calls,
            warmup,
            threads,
            rate,
            in_flight,
            spin_us,
            cpu,
            json,
            no_checksum,
            key,
        } => {
            if let Err(e) = pin(cpu) {
                return fail(e);
            }
            let psk = match key.load() {
                Ok(k) => k,
                Err(e) => return fail(e),
            };
            let spec = BenchSpec {
                uri,
                proc,
                size,
                calls,
                warmup,
                threads,
                rate,
                in_flight,
                spin: spin_us,
                cpu,
                checksum: !no_checksum,
                psk,
                encrypt: key.encrypt,
                ..BenchSpec::default()
            };
            if spec.rate.is_some() {
                return match bench::run_open(&spec) {
                    Ok((s, run)) => {
                        print_summary(&s, json);
                        if json {
                            println!("{}", bench::open_loop_json(&run));
                        } else {
                            println!("{}", run.describe());
                        }
                        ExitCode::SUCCESS
                    }
                    Err(e) => fail(e),
                };
            }
            match bench::run(&spec) {
                Ok(s) => {
                    print_summary(&s, json);
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Cmd::Pingpong { uri, serve, floor, no_checksum, size, calls, warmup, spin_us, cpu, json, key } => {
            if key.encrypt {
                return fail("--encrypt applies to serve, call, bench and stat: a ping-pong carries no RPC frames to encrypt");
            }
            if let Err(e) = pin(cpu) {
                return fail(e);
            }
            let psk = match key.load() {
                Ok(k) => k,
                Err(e) => return fail(e),
            };
            if serve {
                let bound = if floor {
                    lowlat_lab::pingpong::PingPongServer::bind_floor(&uri, spin_us)
                } else {
                    lowlat_lab::pingpong::PingPongServer::bind(&uri, spin_us, !no_checksum, psk.as_ref())
                };
                let server = match bound {
                    Ok(s) => s,
                    Err(e) => return fail(e),
                };
                if let Err(e) = lowlat_sys::block_termination_signals() {
                    return fail(format!("cannot block termination signals: {e}"));
                }
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
                return match echo.join() {
                    Ok(Ok(())) => ExitCode::SUCCESS,
                    Ok(Err(e)) => fail(e),
                    Err(_) => fail("the echo server panicked"),
                };
            }
            match bench::run_raw(
                &uri,
                size,
                calls,
                warmup,
                spin_us,
                lowlat_lab::pingpong::RawOptions { floor, checksum: !no_checksum },
                psk.as_ref(),
            ) {
                Ok((s, _)) => {
                    print_summary(&s, json);
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Cmd::Account { uri, calls, spin_us, json } => {
            let exe = match std::env::current_exe() {
                Ok(e) => e,
                Err(e) => return fail(format!("cannot find the lowlat executable: {e}")),
            };
            match lowlat_lab::account::account(&exe, &uri, calls, spin_us, &lowlat_lab::ladder::Placement::detect()) {
                Ok((a, client_send, server_send)) => {
                    if json {
                        println!("{}", serde_json::to_string(&a).expect("plain data"));
                    } else {
                        print!("{}", lowlat_lab::account::table(&a, client_send, server_send));
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Cmd::Workload { seconds, cpu } => {
            if let Err(e) = pin(cpu) {
                return fail(e);
            }
            println!("ready");
            let (units, ns) = lowlat_lab::workload::run_for(Duration::from_secs_f64(seconds.max(0.01)));
            println!("{}", serde_json::json!({ "units": units, "ns_per_unit": ns }));
            ExitCode::SUCCESS
        }
        Cmd::Gen { file, lang, out } => {
            let lang: lowlat_idl::Lang = match lang.parse() {
                Ok(l) => l,
                Err(e) => return fail(e),
            };
            let files = match lowlat_idl::compile_file(&file, lang) {
                Ok(f) => f,
                // The error already names file:line:column and shows the line with a caret.
                Err(e) => return fail(e),
            };
            if let Err(e) = std::fs::create_dir_all(&out) {
                return fail(format!("create {}: {e}", out.display()));
            }
            for (name, text) in files {
                let path = out.join(&name);
                if let Err(e) = std::fs::write(&path, text) {
                    return fail(format!("write {}: {e}", path.display()));
                }
                println!("wrote {}", path.display());
            }
            ExitCode::SUCCESS
        }
        Cmd::Relay { listen, target, drop, dup, reorder, corrupt, delay, seed, json } => {
            let seed = seed.unwrap_or_else(|| {
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
            });
            let faults = lowlat_relay::Faults { drop, dup, reorder, corrupt, delay, seed };
            match relay(&listen, &target, faults, json) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            }
        }
        Cmd::Lab { key, .. } if key.encrypt => {
            fail("--encrypt applies to serve, call, bench and stat; the laboratory measures encryption with scripts/measure-security.sh")
        }
        Cmd::Lab { quick, out, key } => match lowlat_lab::run_lab(quick, out.as_deref(), key.psk_file.as_deref()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
    }
}
