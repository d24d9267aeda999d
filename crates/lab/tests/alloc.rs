//! A steady-state call allocates nothing, on the client or on the server (both run in this
//! process, so one counting allocator sees both).

use lowlat::{ClientConfig, Server, SpinPolicy};
use lowlat_lab::interface::{self, LabClient};
use lowlat_testkit::CountingAlloc;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

fn calls(c: &LabClient, arg: &[u8], out: &mut Vec<u8>, n: usize) {
    for i in 0..n {
        c.null().unwrap();
        assert_eq!(c.minus(i as i32, 1).unwrap(), i as i32 - 1);
        c.maxarg(arg).unwrap();
        c.maxresult(arg.len() as u32, out).unwrap();
        c.echo(arg, out).unwrap();
    }
}

#[test]
fn steady_state_calls_do_not_allocate() {
    // The counter itself works.
    let (v, n) = ALLOC.count(|| std::hint::black_box(vec![1u8; 64]));
    drop(v);
    assert!(n >= 1, "the counter counts");

    let dir = std::env::temp_dir().join(format!("lowlat-alloc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shm = format!("shm://{}", dir.join("s").display());
    for (scheme, listen) in [("udp", "udp://127.0.0.1:0"), ("tcp", "tcp://127.0.0.1:0"), ("shm", shm.as_str())] {
        for spin in [SpinPolicy::Forever, SpinPolicy::Block] {
            let server = Server::builder()
                .program(interface::program())
                .config(lowlat::ServerConfig { spin, ..Default::default() })
                .serve(&[listen])
                .unwrap();
            let uri = server.local_uris()[0].clone();
            let c = LabClient::connect(&uri, ClientConfig { spin, ..ClientConfig::default() }).unwrap();
            let arg = vec![7u8; 1440];
            let mut out = Vec::with_capacity(4096);
            calls(&c, &arg, &mut out, 200); // warm up: buffers grow to the sizes in use
            let ((), n) = ALLOC.count(|| calls(&c, &arg, &mut out, 1000));
            assert_eq!(n, 0, "{scheme} {spin}: {n} allocations in 5000 steady-state calls");
            server.shutdown();
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
