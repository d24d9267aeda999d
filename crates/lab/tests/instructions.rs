//! The call path's instructions, counted by callgrind with lowlat's counting build (the example
//! `count_calls`, which scripts/test.sh builds with `--features callgrind`): the same count for
//! the same build on any host, so CI can hold a ceiling where a timed test could not. A change
//! that lengthens the null call's path past its ceiling fails here; one that shortens it should
//! lower the ceiling (the figures of the last count are in docs/measurements.md).
//!
//! Without valgrind or the counting build the test says so and passes, unless
//! LOWLAT_REQUIRE_VALGRIND is set (scripts/test.sh sets it).

use std::path::PathBuf;
use std::process::Command;

use lowlat_lab::instructions::{self, Part};
use lowlat_report::Instructions;

/// Ceilings per call, (client to its return, server to its reply out), in the test-release
/// build (compiled crate by crate, as cargo's default release profile builds a user's project:
/// a longer path than the release build's whole-program one). Counted on 2026-12-07: shm null
/// 497/502, udp null 1600/1124, eth null (across a veth pair; root only) 1057/1036; a tenth
/// above, rounded (shm and udp kept from 2026-11-28's thin-LTO build, still above).
const SHM_NULL: (f64, f64) = (555.0, 565.0);
const UDP_NULL: (f64, f64) = (1705.0, 1420.0);
const ETH_NULL: (f64, f64) = (1165.0, 1140.0);

/// The counting build beside this test's executable (target/<profile>/examples), if built.
fn counting_build() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join("examples").join("count_calls");
    let valgrind = Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success());
    if bin.is_file() && valgrind {
        return Some(bin);
    }
    assert!(
        std::env::var_os("LOWLAT_REQUIRE_VALGRIND").is_none(),
        "valgrind and the counting build ({}) are required: scripts/test.sh builds it",
        bin.display()
    );
    eprintln!("skipped: valgrind or the counting build ({}) missing", bin.display());
    None
}

fn part(side: &[lowlat_report::InstructionPart], p: Part) -> f64 {
    side.iter().find(|q| q.name == p.name()).map_or(0.0, |q| q.per_call)
}

fn count(bin: &std::path::Path, scheme: &str, procedure: &str, calls: u64) -> Instructions {
    instructions::count(bin, scheme, procedure, calls).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_call_path_is_counted_the_same_every_time_and_stays_under_its_ceilings() {
    let Some(bin) = counting_build() else { return };
    // Outside valgrind the marks are no-ops and the program simply calls.
    let native = Command::new(&bin).args(["shm", "minus", "50", "10"]).output().unwrap();
    assert!(native.status.success(), "{}", String::from_utf8_lossy(&native.stderr));

    let null = count(&bin, "shm", "null", 40);
    let again = count(&bin, "shm", "null", 70);
    println!("{}", instructions::table("shm", &[null.clone(), again.clone()]));
    // The count per call does not depend on how many calls were counted. (What the server does
    // after its reply does, a little: every 64th look reads the clock, and how many looks a
    // wait takes depends on how valgrind's turns fall.)
    for (a, b) in [(null.client_total, again.client_total), (null.server_total, again.server_total)] {
        assert!((a - b).abs() <= a * 0.01 + 1.0, "{a} against {b} per call");
    }
    // Every layer is on the path, each on its side.
    for p in [Part::Stub, Part::Engine, Part::Transport] {
        assert!(part(&null.client, p) > 0.0, "the client's {} counted nothing", p.name());
    }
    for p in [Part::Engine, Part::Transport, Part::Dispatch, Part::Procedure] {
        assert!(part(&null.server, p) > 0.0, "the server's {} counted nothing", p.name());
    }
    assert_eq!(part(&null.client, Part::Dispatch), 0.0);
    assert_eq!(part(&null.server, Part::Stub), 0.0);
    // MINUS marshals two integers and a result more than NULL: on the stubs, not the engine.
    let minus = count(&bin, "shm", "minus", 40);
    println!("{}", instructions::table("shm", std::slice::from_ref(&minus)));
    assert!(part(&minus.client, Part::Stub) > part(&null.client, Part::Stub));
    assert!(part(&minus.server, Part::Procedure) > part(&null.server, Part::Procedure));
    assert!((part(&minus.server, Part::Engine) - part(&null.server, Part::Engine)).abs() < 5.0);

    let udp = count(&bin, "udp", "null", 40);
    println!("{}", instructions::table("udp", std::slice::from_ref(&udp)));
    let mut held = vec![
        ("shm null, client", null.client_total, SHM_NULL.0),
        ("shm null, server", null.server_total, SHM_NULL.1),
        ("udp null, client", udp.client_total, UDP_NULL.0),
        ("udp null, server", udp.server_total, UDP_NULL.1),
    ];
    // Raw Ethernet across a veth pair between two namespaces the count makes (root only).
    if lowlat_testkit::testhosts::root_or_skip() {
        let eth = count(&bin, "eth", "null", 40);
        println!("{}", instructions::table("eth", std::slice::from_ref(&eth)));
        // The server's count ends at its reply here too, before the bookkeeping after it.
        assert!(eth.server_after_reply > 0.0, "{eth:?}");
        held.push(("eth null, client", eth.client_total, ETH_NULL.0));
        held.push(("eth null, server", eth.server_total, ETH_NULL.1));
    }
    for (what, got, ceiling) in held {
        assert!(got <= ceiling, "{what}: {got:.0} instructions per call, above its ceiling of {ceiling}");
    }
}
