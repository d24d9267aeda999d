//! A steady-state ONC RPC call allocates nothing, on the client or on the server (both run in
//! this process, so one counting allocator sees both), over UDP (through the duplicate-request
//! cache, once it has filled and recycles its buffers) and TCP (record marking).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use lowlat::{Client, Program, Server, ServerConfig};

struct Counting;
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static COUNTING: AtomicBool = AtomicBool::new(false);

// SAFETY: forwards every request to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

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
    COUNTING.store(true, Ordering::SeqCst);
    let v = std::hint::black_box(vec![1u8; 64]);
    COUNTING.store(false, Ordering::SeqCst);
    drop(v);
    assert!(ALLOCATIONS.load(Ordering::SeqCst) >= 1, "the counter counts");

    let program = Program::new(PROG, 1).xdr().procedure(1, "ECHO", |_, a, r| {
        r.extend_from_slice(a);
        Ok(())
    });
    let cfg = ServerConfig { onc_register: false, onc_drc_entries: 64, ..ServerConfig::default() };
    let server = Server::builder()
        .program(program)
        .config(cfg)
        .serve(&["onc+udp://127.0.0.1:0", "onc+tcp://127.0.0.1:0"])
        .unwrap();
    let arg = vec![7u8; 1440];
    for uri in server.local_uris() {
        let c = Client::connect(&uri, PROG, 1).unwrap();
        // Warm up past the cache's size, so its buffers are recycled from here on.
        for _ in 0..500 {
            echo(&c, &arg);
        }
        ALLOCATIONS.store(0, Ordering::SeqCst);
        COUNTING.store(true, Ordering::SeqCst);
        for _ in 0..500 {
            echo(&c, &arg);
        }
        COUNTING.store(false, Ordering::SeqCst);
        let n = ALLOCATIONS.load(Ordering::SeqCst);
        assert_eq!(n, 0, "{uri}: {n} allocations in 500 steady-state calls");
    }
    server.shutdown();
}
