//! The null call through the generated client (`lowlat-build`'s stub of `idl/lab.x`) beside the
//! same call through the raw `lowlat::Client` (encode and decode closures written by hand), over
//! one binding to a server in this process, alternating in rounds of 1000 so that drift on the
//! machine hits both alike; prints p50 and p99 of each and their ratio. Both sides busy-poll.
//!
//! ```text
//! cargo build --release -p lowlat-lab --example generated_vs_raw
//! target/release/examples/generated_vs_raw 200000 udp --pin 0,1
//! target/release/examples/generated_vs_raw 200000 shm --pin 0,1
//! ```

use std::time::{Duration, Instant};

use lowlat::{ClientConfig, Server, ServerConfig, SpinPolicy};
use lowlat_lab::interface::{self, LabClient};

const ROUND: usize = 1000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let calls: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let scheme = args.get(1).cloned().unwrap_or_else(|| "udp".to_string());
    let pins: Option<(usize, usize)> = args.iter().position(|a| a == "--pin").and_then(|i| {
        let (c, s) = args.get(i + 1)?.split_once(',')?;
        Some((c.parse().ok()?, s.parse().ok()?))
    });
    let spin = SpinPolicy::Forever;
    let cfg = ServerConfig { spin, pin_cpus: pins.map(|(_, s)| s).into_iter().collect(), ..ServerConfig::default() };
    let at = if scheme == "shm" {
        format!("shm:///tmp/lowlat-generated-vs-raw-{}.sock", std::process::id())
    } else {
        format!("{scheme}://127.0.0.1:0")
    };
    let server = Server::builder().program(interface::program()).config(cfg).serve(&[at]).expect("serve");
    let uri = server.local_uris()[0].clone();
    if let Some((c, _)) = pins {
        lowlat_sys::pin_to_cpu(c).expect("pin the client thread");
    }
    let generated = LabClient::connect(&uri, ClientConfig { spin, ..ClientConfig::default() }).expect("connect");
    let raw = generated.client();
    let null = |_: &mut lowlat::OutBuf<'_>| Ok::<_, lowlat::DecodeError>(());
    let done = |r: &[u8]| if r.is_empty() { Ok(()) } else { Err(lowlat::DecodeError::new("void", r.len())) };
    let (mut by_stub, mut by_hand) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    for _ in 0..ROUND {
        generated.null().expect("null call");
        raw.call(0, null, done).expect("null call");
    }
    while by_stub.len() < calls {
        for _ in 0..ROUND {
            let t = Instant::now();
            generated.null().expect("null call");
            by_stub.push(t.elapsed());
        }
        for _ in 0..ROUND {
            let t = Instant::now();
            raw.call(0, null, done).expect("null call");
            by_hand.push(t.elapsed());
        }
    }
    let p = |v: &mut Vec<Duration>, q: f64| {
        v.sort_unstable();
        us(v[((v.len() as f64 * q) as usize).min(v.len() - 1)])
    };
    let (g50, g99) = (p(&mut by_stub, 0.50), p(&mut by_stub, 0.99));
    let (r50, r99) = (p(&mut by_hand, 0.50), p(&mut by_hand, 0.99));
    println!("{} null calls each over {uri} (busy-polling, pinned {pins:?})", by_stub.len());
    println!("generated client  p50 {g50:>8.3} us  p99 {g99:>8.3} us");
    println!("raw lowlat::Client p50 {r50:>8.3} us  p99 {r99:>8.3} us");
    println!("generated/raw  p50 {:.2}x  p99 {:.2}x", g50 / r50, g99 / r99);
    server.shutdown();
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
