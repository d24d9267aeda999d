//! A steady-state call allocates nothing, on the client or on the server (both run in this
//! process, so one counting allocator sees both).

mod common;

use lowlat_testkit::CountingAlloc;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

#[test]
fn steady_state_calls_do_not_allocate() {
    // The counter itself works.
    let (v, n) = ALLOC.count(|| std::hint::black_box(vec![1u8; 64]));
    drop(v);
    assert!(n >= 1, "the counter counts");

    let dir = std::env::temp_dir().join(format!("lowlat-alloc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shm = format!("shm://{}", dir.join("s").display());
    let listens = [("udp", "udp://127.0.0.1:0"), ("tcp", "tcp://127.0.0.1:0"), ("shm", shm.as_str())];
    for (scheme, spin, n) in common::steady_state(&ALLOC, &listens, 1440, true, false) {
        assert_eq!(n, 0, "{scheme} {spin}: {n} allocations in 5000 steady-state calls");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
