//! N ONC RPC null calls over `onc+udp://` (or the URI scheme given) against a server in this
//! process, both sides blocking (no spinning), so that instruction counts are repeatable: run it
//! under callgrind with two call counts and take the difference per call, client (main thread)
//! and server (the `lowlat-onc+udp` thread) apart.
//!
//! ```text
//! cargo build --profile test-release -p lowlat --example onc_null
//! valgrind --tool=callgrind --separate-threads=yes target/test-release/examples/onc_null 20000
//! valgrind --tool=callgrind --separate-threads=yes target/test-release/examples/onc_null 40000
//! ```

use lowlat::{Client, ClientConfig, Program, Server, ServerConfig, SpinPolicy};

const PROG: u32 = 0x2000_0b1e;

fn main() {
    let mut args = std::env::args().skip(1);
    let calls: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let scheme = args.next().unwrap_or_else(|| "onc+udp".to_string());
    let program = Program::new(PROG, 1).xdr().procedure(0, "NULL", |_, _, _| Ok(()));
    let cfg = ServerConfig { spin: SpinPolicy::Block, onc_register: false, ..ServerConfig::default() };
    let server = Server::builder().program(program).config(cfg).serve(&[format!("{scheme}://127.0.0.1:0")]).unwrap();
    let uri = &server.local_uris()[0];
    let client =
        Client::connect_with(uri, PROG, 1, ClientConfig { spin: SpinPolicy::Block, ..ClientConfig::default() })
            .unwrap();
    for _ in 0..calls {
        client.call(0, |_| Ok::<_, lowlat::DecodeError>(()), |_| Ok(())).unwrap();
    }
    println!("{calls} null calls over {uri}");
    server.shutdown();
}
