//! The null call, blocking and async, in one run: a server in this process (on its own CPU
//! when asked), then N blocking null calls and N async ones (`Client::call_async`, awaited one
//! at a time on a tokio current-thread runtime) over the same binding, alternating in rounds of
//! 1000 so that drift on the machine hits both alike; prints p50 and p99 of each and their
//! ratio. Both sides use the default (adaptive) spin policy unless `--block` is given.
//!
//! ```text
//! cargo build --profile test-release -p lowlat --example async_null
//! target/test-release/examples/async_null 200000 udp --pin 0,1
//! target/test-release/examples/async_null 200000 shm --pin 0,1
//! ```

use std::time::{Duration, Instant};

use lowlat::{Client, ClientConfig, Program, Server, ServerConfig, SpinPolicy};

const PROG: u32 = 0x2000_0b20;
const ROUND: usize = 1000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let calls: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let scheme = args.get(1).cloned().unwrap_or_else(|| "udp".to_string());
    let pins: Option<(usize, usize)> = args.iter().position(|a| a == "--pin").and_then(|i| {
        let (c, s) = args.get(i + 1)?.split_once(',')?;
        Some((c.parse().ok()?, s.parse().ok()?))
    });
    let spin = if args.iter().any(|a| a == "--block") { SpinPolicy::Block } else { SpinPolicy::Adaptive };

    let program = Program::new(PROG, 1).procedure(0, "NULL", |_, _, _| Ok(()));
    let cfg = ServerConfig { spin, pin_cpus: pins.map(|(_, s)| s).into_iter().collect(), ..ServerConfig::default() };
    let at = if scheme == "shm" {
        format!("shm:///tmp/lowlat-async-null-{}.sock", std::process::id())
    } else {
        format!("{scheme}://127.0.0.1:0")
    };
    let server = Server::builder().program(program).config(cfg).serve(&[at]).unwrap();
    let uri = server.local_uris()[0].clone();
    if let Some((c, _)) = pins {
        lowlat_sys::pin_to_cpu(c).expect("pin the client thread");
    }
    let client = Client::connect_with(&uri, PROG, 1, ClientConfig { spin, ..ClientConfig::default() }).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();

    let null = |_: &mut lowlat::OutBuf<'_>| Ok::<_, lowlat::DecodeError>(());
    let done = |_: &[u8]| Ok::<_, lowlat::DecodeError>(());
    let (mut blocking, mut asynchronous) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    // Warm both paths (slots opened, buffers grown, the reactor thread started).
    for _ in 0..ROUND {
        client.call(0, null, done).unwrap();
        rt.block_on(client.call_async(0, null, done)).unwrap();
    }
    while blocking.len() < calls {
        for _ in 0..ROUND {
            let t = Instant::now();
            client.call(0, null, done).unwrap();
            blocking.push(t.elapsed());
        }
        rt.block_on(async {
            for _ in 0..ROUND {
                let t = Instant::now();
                client.call_async(0, null, done).await.unwrap();
                asynchronous.push(t.elapsed());
            }
        });
    }
    let p = |v: &mut Vec<Duration>, q: f64| {
        v.sort_unstable();
        v[((v.len() as f64 * q) as usize).min(v.len() - 1)]
    };
    let (b50, b99) = (p(&mut blocking, 0.50), p(&mut blocking, 0.99));
    let (a50, a99) = (p(&mut asynchronous, 0.50), p(&mut asynchronous, 0.99));
    println!("{} null calls each over {uri} (spin {spin:?}, pinned {pins:?})", blocking.len());
    println!("blocking  p50 {:>8.2} us  p99 {:>8.2} us", us(b50), us(b99));
    println!("async     p50 {:>8.2} us  p99 {:>8.2} us", us(a50), us(a99));
    println!("async/blocking  p50 {:.2}x  p99 {:.2}x", us(a50) / us(b50), us(a99) / us(b99));
    server.shutdown();
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
