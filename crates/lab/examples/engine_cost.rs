//! The protocol engines' in-process cost of one null call (client and server, no I/O), the
//! figure `lowlat account` uses in its model check; run under `perf record` to see where it goes,
//! or under `valgrind --tool=callgrind` (with a small CALLS) to count instructions.
//!
//! `cargo run --release -p lowlat-lab --example engine_cost [CALLS] [keyed|plain|both]`
//!
//! `keyed`: sessions bound with a pre-shared key, every frame tagged and checked (the per-call
//! cost of `--psk-file`); `plain` (the default): without one.

fn main() {
    let mut args = std::env::args().skip(1);
    let calls: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let which = args.next().unwrap_or_else(|| "plain".into());
    let psk = lowlat::Psk::new(b"a pre-shared key of 32 bytes....").expect("long enough");
    let keys: Vec<Option<&lowlat::Psk>> = match which.as_str() {
        "keyed" => vec![Some(&psk)],
        "both" => vec![None, Some(&psk)],
        _ => vec![None],
    };
    for key in keys {
        let how = if key.is_some() { "keyed" } else { "plain" };
        let sessions = [
            (false, false, "datagram session (udp, eth, xdp)"),
            (true, false, "reliable session (tcp)"),
            (true, true, "reliable session, call completed in the ring (shm)"),
        ];
        for (reliable, in_place, what) in sessions {
            if in_place && key.is_some() {
                continue; // keys are not used over shm
            }
            let (client, server) = lowlat_lab::account::engine_costs(calls, reliable, in_place, key);
            println!("{how} {what}: client engine {client:.1} ns, server engine {server:.1} ns per null call");
        }
    }
}
