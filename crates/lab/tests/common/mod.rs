//! What the allocation tests share: warm calls over each scheme and waiting mode, counted by the
//! test binary's own counting allocator (a process has one global allocator and one global
//! `tracing` subscriber, hence a test binary per setting).

use lowlat::{ClientConfig, Server, ServerConfig, SpinPolicy};
use lowlat_lab::interface::{self, LabClient};
use lowlat_testkit::CountingAlloc;

/// `n` rounds of NULL, MINUS and ECHO of `arg` (with `bulk`, MAXARG and MAXRESULT of its size
/// too).
pub fn calls(c: &LabClient, arg: &[u8], out: &mut Vec<u8>, n: usize, bulk: bool) {
    for i in 0..n {
        c.null().unwrap();
        assert_eq!(c.minus(i as i32, 1).unwrap(), i as i32 - 1);
        if bulk {
            c.maxarg(arg).unwrap();
            c.maxresult(arg.len() as u32, out).unwrap();
        }
        c.echo(arg, out).unwrap();
    }
}

/// For each (scheme, URI to serve) of `listens` and each waiting mode (busy-polling, blocking):
/// the allocations `alloc` counts in 1,000 rounds of [`calls`] after 200 to warm up (buffers
/// grow to the sizes in use), client and server in this process. `spans`: the configurations'.
pub fn steady_state(
    alloc: &CountingAlloc,
    listens: &[(&str, &str)],
    arg_len: usize,
    bulk: bool,
    spans: bool,
) -> Vec<(String, SpinPolicy, usize)> {
    let mut counted = Vec::new();
    for &(scheme, listen) in listens {
        for spin in [SpinPolicy::Forever, SpinPolicy::Block] {
            let server = Server::builder()
                .program(interface::program())
                .config(ServerConfig { spin, spans, ..Default::default() })
                .serve(&[listen])
                .unwrap();
            let uri = server.local_uris()[0].clone();
            let c = LabClient::connect(&uri, ClientConfig { spin, spans, ..ClientConfig::default() }).unwrap();
            let arg = vec![7u8; arg_len];
            let mut out = Vec::with_capacity(4096);
            calls(&c, &arg, &mut out, 200, bulk);
            let ((), n) = alloc.count(|| calls(&c, &arg, &mut out, 1000, bulk));
            counted.push((scheme.to_string(), spin, n as usize));
            server.shutdown();
        }
    }
    counted
}
