//! The counting build's program: calls of one procedure of the laboratory's service over one
//! transport, through the client generated from `idl/lab.x`, against the same service served in
//! this process, both sides busy-polling as a latency-minded deployment does, with lowlat's
//! callgrind marks (`lowlat_sys::callgrind`) on. Under `valgrind --tool=callgrind
//! --collect-atstart=no --separate-threads=yes` each thread's count then holds its side of the
//! calls and nothing of their waiting: a look that finds nothing is not counted, one that finds
//! a frame is from the moment it does. `lowlat instructions` (and `lowlat account`) run it and
//! divide by the calls.
//!
//! ```text
//! cargo build --release -p lowlat-lab --features callgrind --example count_calls
//! valgrind --tool=callgrind --collect-atstart=no --separate-threads=yes \
//!     target/release/examples/count_calls shm null 2000
//! ```
//!
//! The server's count runs from the look that finds a call to its next look; with
//! LOWLAT_COUNT_TO_REPLY=1 in the environment, only until its reply is out. With
//! LOWLAT_COUNT_MEMBERS=N the client is one over N servers (N copies of the one URI), to count
//! what spreading calls over servers costs a call.
//!
//! eth and xdp run across a veth pair: the server's socket opened in one network namespace, the
//! client's in the other, as `LOWLAT_COUNT_LINK` names them (`lowlat instructions` makes the
//! pair and sets it).
//!
//! Usage: `count_calls SCHEME null|minus CALLS [WARMUP]`. The first WARMUP calls (default 200)
//! open channels, grow buffers and settle the spinners; then both threads' counts are zeroed
//! (callgrind zeroes the calling thread's: the serving thread's are zeroed by a procedure of
//! its own, `ZERO`, called on a binding of its own that is closed before the counted calls).

use lowlat::{Client, ClientConfig, Program, Server, ServerConfig, SpinPolicy};
use lowlat_lab::interface::{self, LabClient};

/// The counting program's own program, with `ZERO` (procedure 0).
const ZERO_PROGRAM: u32 = 0x2000_4c5a;

/// Zeroes the serving thread's counts (inline procedures run on it), and stops counting the rest
/// of this call.
fn zero_program() -> Program {
    Program::new(ZERO_PROGRAM, 1).procedure(0, "ZERO", |_, _, _| {
        lowlat_sys::callgrind::zero_stats();
        lowlat_sys::callgrind::mark(false);
        Ok(())
    })
}

fn main() {
    if let Err(e) = run() {
        eprintln!("count_calls: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: count_calls SCHEME null|minus CALLS [WARMUP]";
    let [scheme, proc, calls, rest @ ..] = args.as_slice() else { return Err(usage.into()) };
    let calls: u32 = calls.parse().map_err(|_| format!("CALLS: not a number: {calls}"))?;
    let warmup: u32 = match rest.first() {
        Some(w) => w.parse().map_err(|_| format!("WARMUP: not a number: {w}"))?,
        None => 200,
    };
    lowlat_sys::callgrind::set_reply_ends_count(std::env::var_os("LOWLAT_COUNT_TO_REPLY").is_some_and(|v| v == "1"));
    let minus = match proc.as_str() {
        "null" => false,
        "minus" => true,
        other => return Err(format!("PROC: null or minus, not {other:?}")),
    };
    // eth:// and xdp:// need a link: the server in one network namespace, the client in the
    // other (LOWLAT_COUNT_LINK, which `lowlat instructions` sets after making the pair).
    let link = match scheme.as_str() {
        "eth" | "xdp" => Some(Link::from_env()?),
        _ => None,
    };
    let at = match scheme.as_str() {
        "shm" => format!("shm:///tmp/lowlat-count-calls-{}.sock", std::process::id()),
        "udp" | "tcp" | "onc+udp" | "onc+tcp" => format!("{scheme}://127.0.0.1:0"),
        "eth" | "xdp" => format!("{scheme}://{}", link.as_ref().map_or("", |l| l.server_iface.as_str())),
        other => return Err(format!("SCHEME: shm, udp, tcp, onc+udp, onc+tcp, eth or xdp, not {other:?}")),
    };
    if let Some(l) = &link {
        // The serving threads, started by `serve`, stay where this thread is now.
        l.enter(&l.server_ns)?;
    }
    // ONC RPC over UDP: a duplicate-request cache that the warm-up fills, so that the counted
    // calls recycle its entries as a server in service does (the default 1,024 would still be
    // filling, allocating for each call).
    let cfg = ServerConfig { spin: SpinPolicy::Forever, onc_drc_entries: 16, ..ServerConfig::default() };
    let [native, xdr] = interface::programs();
    // ONC RPC serves the programs whose bodies are XDR; lowlat's protocol the others.
    let zero = if scheme.starts_with("onc+") { zero_program().xdr() } else { zero_program() };
    let server = Server::builder()
        .program(native)
        .program(xdr)
        .program(zero)
        .config(cfg)
        .serve(&[at])
        .map_err(|e| e.to_string())?;
    let uri = match &link {
        Some(l) => {
            l.enter(&l.client_ns)?;
            format!("{scheme}://{}/{}", l.client_iface, l.server_mac)
        }
        None => server.local_uris()[0].clone(),
    };
    let cfg = ClientConfig { spin: SpinPolicy::Forever, ..ClientConfig::default() };
    // LOWLAT_COUNT_MEMBERS=N: a client over N servers (each this one, so that the counted path
    // differs from the single server's by the spreading alone).
    let members: usize = std::env::var("LOWLAT_COUNT_MEMBERS").ok().and_then(|n| n.parse().ok()).unwrap_or(1);
    let list = vec![uri.clone(); members.max(1)].join(",");
    let client = LabClient::connect(&list, cfg.clone()).map_err(|e| e.to_string())?;
    let call = |i: u32| -> Result<(), String> {
        let a = i as i32;
        lowlat_sys::callgrind::mark(true);
        let r = if minus { client.minus(a, 7).map(|d| d == a.wrapping_sub(7)) } else { client.null().map(|()| true) };
        lowlat_sys::callgrind::mark(false);
        match r {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!("call {i}: MINUS answered wrong")),
            Err(e) => Err(format!("call {i}: {e}")),
        }
    };
    for i in 0..warmup {
        call(i)?;
    }
    let zero = Client::connect_with(&uri, ZERO_PROGRAM, 1, cfg).map_err(|e| e.to_string())?;
    zero.call(0, |_| Ok::<_, lowlat::DecodeError>(()), |_| Ok(())).map_err(|e| format!("ZERO: {e}"))?;
    drop(zero);
    lowlat_sys::callgrind::zero_stats();
    for i in 0..calls {
        call(i)?;
    }
    println!("{calls} {proc} calls counted over {uri} (after {warmup})");
    server.shutdown();
    Ok(())
}

/// Where an eth:// or xdp:// count runs: `LOWLAT_COUNT_LINK="SERVER_NS SERVER_IFACE CLIENT_NS
/// CLIENT_IFACE SERVER_MAC"`, the two ends of a veth pair in two network namespaces (`ip netns`
/// names).
struct Link {
    server_ns: String,
    server_iface: String,
    client_ns: String,
    client_iface: String,
    server_mac: String,
}

impl Link {
    fn from_env() -> Result<Link, String> {
        let usage = "eth and xdp need LOWLAT_COUNT_LINK=\"SERVER_NS SERVER_IFACE CLIENT_NS CLIENT_IFACE SERVER_MAC\" \
                     (lowlat instructions sets it)";
        let v = std::env::var("LOWLAT_COUNT_LINK").map_err(|_| usage.to_string())?;
        let [server_ns, server_iface, client_ns, client_iface, server_mac] =
            <[&str; 5]>::try_from(v.split_whitespace().collect::<Vec<_>>()).map_err(|_| usage.to_string())?;
        Ok(Link {
            server_ns: server_ns.into(),
            server_iface: server_iface.into(),
            client_ns: client_ns.into(),
            client_iface: client_iface.into(),
            server_mac: server_mac.into(),
        })
    }

    /// Moves this thread into the namespace `ns`: the sockets it opens from now on are there.
    fn enter(&self, ns: &str) -> Result<(), String> {
        let path = std::path::Path::new("/run/netns").join(ns);
        lowlat_sys::netns::enter_netns(&path).map_err(|e| format!("enter network namespace {ns}: {e}"))
    }
}
