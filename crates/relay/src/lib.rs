//! A fault-injecting relay to put between any client and server that speak datagrams
//! (`udp://`, `onc+udp://`): it drops, duplicates, reorders, delays and corrupts what passes, at
//! rates a user chooses, from a seed, and says at the end what it did (`lowlat relay`). This
//! machine's kernel has no `netem`: this is how loss, duplication, reordering and delay reach
//! lowlat's real sockets in tests and soaks.
//!
//! [`faults`] decides (sans-I/O, seeded, tested in virtual time); [`udp`] moves the datagrams;
//! [`frames`] moves raw Ethernet frames between two interfaces (eth:// and xdp:// in the tests'
//! namespaces).
//! This crate must never depend on lowlat's protocol or runtime: it relays bytes it does not
//! read, so it is a fair referee for any peer.

#![warn(missing_docs)]

pub mod faults;
pub mod frames;
pub mod udp;

pub use faults::{Delay, Faults, ParseError, Probability, Stats};
pub use frames::{FrameRelay, FrameReport};
pub use udp::{RelayThread, Report, UdpRelay};

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "clients seen: {}", self.clients)?;
        table(f, &[("to the target", &self.to_target), ("to the clients", &self.to_clients)])
    }
}

impl std::fmt::Display for FrameReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        table(f, &[("first to second", &self.first_to_second), ("second to first", &self.second_to_first)])
    }
}

/// What happened in each direction, a line each under a heading.
fn table(f: &mut std::fmt::Formatter<'_>, directions: &[(&str, &Stats)]) -> std::fmt::Result {
    writeln!(
        f,
        "{:<18} {:>10} {:>10} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9}",
        "direction", "received", "sent", "dropped", "duplicated", "reordered", "delayed", "corrupted", "overflow"
    )?;
    for (name, s) in directions {
        writeln!(
            f,
            "{:<18} {:>10} {:>10} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9}",
            name, s.received, s.sent, s.dropped, s.duplicated, s.reordered, s.delayed, s.corrupted, s.overflow
        )?;
    }
    Ok(())
}
