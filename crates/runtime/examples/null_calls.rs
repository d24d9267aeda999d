//! N null calls of lowlat's own protocol over `udp://` (or the scheme given: tcp, shm) against a
//! server in this process, both sides blocking (no spinning), so that instruction counts are
//! repeatable: run it under callgrind with two call counts and take the difference per call,
//! client (main thread) and server (the `lowlat-SCHEME` thread) apart. `keyed`: bound with a
//! pre-shared key, every frame tagged and checked. `echo=BYTES`: each call an ECHO of that many
//! bytes (the result checked) instead of a null call.
//!
//! This counts whole blocking calls, waits and wake-ups included, and covers keys and echo
//! sizes. For the call path itself, per side and part by part with the waiting left out, use
//! `lowlat instructions` (the counting build `crates/lab/examples/count_calls.rs`).
//!
//! ```text
//! cargo build --profile test-release -p lowlat --example null_calls
//! valgrind --tool=callgrind --separate-threads=yes target/test-release/examples/null_calls 20000 udp
//! valgrind --tool=callgrind --separate-threads=yes target/test-release/examples/null_calls 40000 udp
//! valgrind --tool=callgrind --separate-threads=yes target/test-release/examples/null_calls 20000 udp keyed
//! valgrind --tool=callgrind --separate-threads=yes target/test-release/examples/null_calls 20000 shm echo=1024
//! ```

use lowlat::{Client, ClientConfig, Program, Psk, Server, ServerConfig, SpinPolicy};

const PROG: u32 = 0x2000_0b1f;

#[derive(Debug, thiserror::Error)]
#[error("the echo came back changed")]
struct BadEcho;

fn main() {
    let mut args = std::env::args().skip(1);
    let calls: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let scheme = args.next().unwrap_or_else(|| "udp".to_string());
    let (mut psk, mut echo) = (None, None);
    for a in args {
        match a.strip_prefix("echo=") {
            Some(n) => echo = Some(n.parse::<usize>().expect("echo=BYTES")),
            None if a == "keyed" => psk = Some(Psk::new(b"a pre-shared key of 32 bytes....").unwrap()),
            None => panic!("unknown option {a:?}: keyed, echo=BYTES"),
        }
    }
    let program = Program::new(PROG, 1).procedure(0, "NULL", |_, _, _| Ok(())).procedure(1, "ECHO", |_, args, out| {
        out.extend_from_slice(args);
        Ok(())
    });
    let cfg = ServerConfig { spin: SpinPolicy::Block, psk: psk.clone(), ..ServerConfig::default() };
    let at = if scheme == "shm" {
        format!("shm:///tmp/lowlat-null-calls-{}.sock", std::process::id())
    } else {
        format!("{scheme}://127.0.0.1:0")
    };
    let server = Server::builder().program(program).config(cfg).serve(&[at]).unwrap();
    let uri = &server.local_uris()[0];
    let cfg = ClientConfig { spin: SpinPolicy::Block, psk, ..ClientConfig::default() };
    let client = Client::connect_with(uri, PROG, 1, cfg).unwrap();
    match echo {
        None => {
            for _ in 0..calls {
                client.call(0, |_| Ok::<_, lowlat::DecodeError>(()), |_| Ok(())).unwrap();
            }
            println!("{calls} null calls over {uri}");
        }
        Some(n) => {
            let data: Vec<u8> = (0..n).map(|i| i as u8).collect();
            for _ in 0..calls {
                let decode = |r: &[u8]| if r == data { Ok(()) } else { Err(BadEcho) };
                client
                    .call(
                        1,
                        |buf| {
                            buf.extend_from_slice(&data);
                            Ok(())
                        },
                        decode,
                    )
                    .unwrap();
            }
            println!("{calls} echo calls of {n} bytes over {uri}");
        }
    }
    server.shutdown();
}
