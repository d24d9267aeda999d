//! A steady-state ONC RPC call allocates nothing, on the client or on the server (both run in
//! this process, so one counting allocator sees both), over UDP (through the duplicate-request
//! cache, once it has filled and recycles its buffers) and TCP (record marking); nor does a
//! server that has started and is idle.

use lowlat::{Client, Program, Server, ServerConfig};
use lowlat_testkit::CountingAlloc;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

const PROG: u32 = 0x2000_7702;

fn echo(c: &Client, arg: &[u8]) {
    let n = c
        .call(
            1,
            |b| {
                b.extend_from_slice(arg);
                Ok::<_, lowlat::DecodeError>(())
            },
            |r| Ok(r.len()),
        )
        .unwrap();
    assert_eq!(n, arg.len());
}

#[test]
fn steady_state_onc_calls_do_not_allocate() {
    let (v, n) = ALLOC.count(|| std::hint::black_box(vec![1u8; 64]));
    drop(v);
    assert!(n >= 1, "the counter counts");

    let program = Program::new(PROG, 1).xdr().procedure(1, "ECHO", |_, a, r| {
        r.extend_from_slice(a);
        Ok(())
    });
    let cfg = ServerConfig { onc_register: false, onc_drc_entries: 64, ..ServerConfig::default() };
    let server = Server::builder()
        .program(program)
        .config(cfg)
        .serve(&["onc+udp://127.0.0.1:0", "onc+tcp://127.0.0.1:0", "onc+udp://127.0.0.1:0", "onc+tcp://127.0.0.1:0"])
        .unwrap();
    // `serve` returns once every serving thread has set itself up: an idle server allocates
    // nothing from then on (on a loaded machine, a thread still starting once made a client's
    // steady-state calls on another endpoint look as if they allocated).
    let ((), n) = ALLOC.count(|| std::thread::sleep(std::time::Duration::from_millis(20)));
    assert_eq!(n, 0, "{n} allocations by an idle server after serve returned");
    let arg = vec![7u8; 1440];
    for uri in server.local_uris() {
        let c = Client::connect(&uri, PROG, 1).unwrap();
        // Warm up past the cache's size, so its buffers are recycled from here on.
        for _ in 0..500 {
            echo(&c, &arg);
        }
        let ((), n) = ALLOC.count(|| {
            for _ in 0..500 {
                echo(&c, &arg);
            }
        });
        assert_eq!(n, 0, "{uri}: {n} allocations in 500 steady-state calls");
    }
    server.shutdown();
}
