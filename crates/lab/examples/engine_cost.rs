//! The protocol engines' in-process cost of one null call (client and server, no I/O), the
//! figure `lowlat account` uses in its model check; run under `perf record` to see where it goes.
//!
//! `cargo run --release -p lowlat-lab --example engine_cost [CALLS]`

fn main() {
    let calls: u32 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    for (reliable, what) in [(false, "datagram session (udp, eth, xdp)"), (true, "reliable session (tcp, shm)")] {
        let (client, server) = lowlat_lab::account::engine_costs(calls, reliable);
        println!("{what}: client engine {client:.1} ns, server engine {server:.1} ns per null call");
    }
}
