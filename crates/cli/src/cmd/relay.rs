//! `lowlat relay`: a fault-injecting datagram relay between clients and a server.

use std::time::Duration;

/// A fault-injecting relay to put between a client and its server over datagrams: drops,
/// duplicates, reorders, delays and corrupts what passes, both ways, and says at exit
/// (SIGINT, SIGTERM) what it did.
///
/// Clients call the relay's address (printed as `serving URI`) instead of the server's.
/// Probabilities as 0.05 or 5%; delays as 0, 200us (fixed), 100us-2ms (uniform) or exp:300us
/// (exponential with that mean).
#[derive(clap::Args)]
pub(crate) struct Args {
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
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let Args { listen, target, drop, dup, reorder, corrupt, delay, seed, json } = args;
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    let faults = lowlat_relay::Faults { drop, dup, reorder, corrupt, delay, seed };
    relay(&listen, &target, faults, json)
}

/// The address of a datagram endpoint URI, and its scheme.
fn datagram_addr(uri: &str) -> Result<(std::net::SocketAddr, &'static str), String> {
    let endpoint: lowlat::Endpoint = uri.parse().map_err(|e: lowlat_addr::UriError| e.to_string())?;
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
    lowlat_sys::block_server_signals().map_err(|e| format!("cannot block termination signals: {e}"))?;
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
