//! Counters: what a server endpoint and a client binding have done, as Aeron's counters or
//! brpc's variables are: plain numbers kept where the work is done, read on request.
//!
//! A serving thread keeps its endpoint's counters in its own memory (the protocol engine's and
//! its own, no atomics on the call path) and publishes a copy only when asked
//! ([`Server::stats`](crate::Server::stats) rings its doorbell and waits for the copy). The
//! built-in stats program ([`PROGRAM`], served on every lowlat endpoint behind the same binding
//! and key as every other program) answers `lowlat stat` from the serving thread itself, so
//! its figures include the binding and the call that read them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::serving::timing::ProcedureTimes;

/// The stats program: program 0x20004C4E version 1, procedure [`STATS`] `() -> string`, one
/// counter a line as `name value`.
pub const PROGRAM: u32 = 0x2000_4C4E;
/// Procedure of [`PROGRAM`]: the endpoint's counters.
pub const STATS: u32 = 1;

/// Defines a struct of `u64` counters that can list itself by name.
macro_rules! counters {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[doc = $doc:literal])+ $field:ident,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[doc = $doc])+ pub $field: u64,)*
        }

        impl $name {
            /// Every counter, by name, in a fixed order.
            pub fn fields(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($field), self.$field)),*]
            }

            /// The sum, counter by counter.
            pub fn plus(&self, other: &Self) -> Self {
                Self { $($field: self.$field + other.$field),* }
            }

            /// The counters named in `fields` (as [`parse_text`] reads them); names this version
            /// does not know are left out, and counters not named are 0.
            pub fn from_fields(fields: &[(String, u64)]) -> Self {
                let mut s = Self::default();
                for (k, v) in fields {
                    match k.as_str() {
                        $(stringify!($field) => s.$field = *v,)*
                        _ => {}
                    }
                }
                s
            }

            /// What counter `name` counts (its documentation; empty for a name it lacks).
            pub fn help(name: &str) -> &'static str {
                match name {
                    $(stringify!($field) => concat!($($doc),+).trim(),)*
                    _ => "",
                }
            }
        }
    };
}

counters! {
    /// What one server endpoint has done since it started serving.
    pub struct EndpointStats {
        /// Sessions alive now.
        sessions_open,
        /// Sessions dropped for idleness, or for making no call within seconds of their bind.
        sessions_expired,
        /// Idle sessions given up to make room for a new one.
        sessions_reclaimed,
        /// Sessions dropped because their connections closed.
        sessions_closed,
        /// New sessions.
        binds_granted,
        /// Retransmitted binds answered with the session the first one made.
        binds_repeated,
        /// Binds refused, all causes (the `refused_*` counters).
        binds_refused,
        /// Binds for a program the endpoint does not serve.
        refused_unknown_program,
        /// Binds for a version outside the range served.
        refused_version,
        /// Binds of another protocol version (older clients).
        refused_protocol,
        /// Bind requests that made no sense.
        refused_malformed,
        /// Binds refused because every session had a call in progress.
        refused_full,
        /// Binds refused because their source held its share of sessions.
        refused_source_limit,
        /// Binds without a key where one is required.
        refused_key_required,
        /// Binds with a key where the endpoint has none.
        refused_key_not_expected,
        /// Binds whose proof of the key was wrong.
        refused_bad_key,
        /// Binds refused for encryption: not asked where the endpoint requires it, or asked
        /// without a key.
        refused_encryption,
        /// Cookies sent in answer to first binds (no state kept).
        cookies_issued,
        /// Binds whose cookie was forged, another address's, or expired.
        cookies_rejected,
        /// New calls received.
        calls,
        /// Procedures run (the stats program's included).
        executed,
        /// Copies of finished calls answered from the saved result.
        duplicates,
        /// Copies of running calls answered "working".
        working,
        /// Copies of calls no longer current, dropped.
        stale,
        /// Frames the clients marked as retransmissions.
        retransmits_received,
        /// Call fragments of messages larger than one frame.
        fragments_received,
        /// Calls answered `Busy` without running: the worker pool's queue was full, or the
        /// server was shedding load ([`Server::shed_load`](crate::Server::shed_load)) or
        /// stopping.
        busy,
        /// Calls of procedures the program lacks.
        errors_unknown_procedure,
        /// Calls whose arguments the procedure could not decode.
        errors_garbage_args,
        /// Calls whose procedure failed.
        errors_server_error,
        /// Calls or results larger than the session allows.
        errors_too_large,
        /// Frames for sessions the endpoint does not know.
        unknown_session,
        /// Frames handed to the protocol.
        frames_in,
        /// Frames sent.
        frames_out,
        /// Bytes of the frames handed to the protocol.
        bytes_in,
        /// Bytes of the frames sent.
        bytes_out,
        /// Frames that were not the protocol's or made no sense.
        malformed,
        /// Frames of keyed sessions whose tag was missing or wrong (dropped).
        mac_failures,
        /// Frames of a session from an address its slot had not proven (nothing run, nothing
        /// answered but a path challenge).
        unproven,
        /// Path challenges sent to such addresses.
        path_challenges,
        /// Addresses that answered a challenge (a client that moved, or a slot's first call).
        paths_validated,
        /// Path responses that were forged, another address's, or expired.
        path_failures,
        /// Answers not sent to an unproven address because they were larger than what it sent.
        withheld,
        /// Datagrams or Ethernet frames this endpoint dropped for a wrong CRC32C.
        checksum_failures,
        /// Datagrams or connections from sources outside the allowlist (dropped).
        not_allowed,
        /// TCP connections refused at a limit (total, or per source).
        connections_refused,
        /// TCP connections closed for not binding in time.
        connections_unbound_closed,
        /// Shared-memory connections closed because the client broke its rings.
        corrupt_connections,
        /// CPU time the endpoint's serving thread has used, ns (its own clock, spinning while
        /// idle included): over a saturated run, its growth over the calls' is the server's
        /// cost per call.
        serving_cpu_ns,
    }
}

counters! {
    /// What one client binding has done since it was made.
    pub struct ClientStats {
        /// Binds made (the first, and any after the server lost the session).
        binds,
        /// Calls sent.
        calls,
        /// Retransmissions sent (call fragments, probes, stalled acknowledgements).
        retransmissions,
        /// Frames whose tag was missing or wrong (ignored).
        mac_failures,
        /// Frames ignored as stale or making no sense for their slot.
        ignored,
    }
}

impl EndpointStats {
    /// The counters as the stats program sends them: `name value`, one a line.
    pub fn to_text(&self) -> String {
        self.fields().iter().map(|(k, v)| format!("{k} {v}\n")).collect()
    }
}

/// The stats program's answer from the endpoint `client` is bound to (a client of [`PROGRAM`]):
/// counters, then the sampled calls' times, as text (read it with [`parse_text`]).
pub fn read(client: &crate::Client) -> Result<String, crate::Error> {
    client.call::<_, lowlat_codec::DecodeError>(STATS, |_| Ok(()), |r| Ok(String::from_utf8_lossy(r).into_owned()))
}

/// Reads the stats program's answer: every `name value` line, in order, names this version
/// does not know included (a newer server's counters). Lines that are not `name value` are
/// skipped.
pub fn parse_text(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// What a serving thread publishes when asked: its counters and its calls' times, per
/// procedure id (`serving::timing`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Snapshot {
    pub counters: EndpointStats,
    pub times: Vec<ProcedureTimes>,
}

/// Where a serving thread publishes a copy of its counters when someone asks.
#[derive(Default)]
pub(crate) struct StatsBoard {
    asked: AtomicU64,
    answered: AtomicU64,
    copy: Mutex<Snapshot>,
}

impl StatsBoard {
    /// Asks for a copy; returns the number of the request, to wait for.
    pub fn ask(&self) -> u64 {
        self.asked.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Whether a copy was asked for since the last one published.
    pub fn wanted(&self) -> bool {
        self.asked.load(Ordering::Acquire) != self.answered.load(Ordering::Acquire)
    }

    /// Publishes `stats` and `times`, answering every request so far.
    pub fn publish(&self, stats: EndpointStats, times: &[ProcedureTimes]) {
        let asked = self.asked.load(Ordering::Acquire);
        {
            let mut copy = self.copy.lock().unwrap_or_else(|p| p.into_inner());
            copy.counters = stats;
            copy.times.clear();
            copy.times.extend_from_slice(times);
        }
        self.answered.store(asked, Ordering::Release);
    }

    /// The copy answering request `n`, waiting up to `patience` for it (the serving thread
    /// may be running a long procedure); the latest copy, perhaps older, after that.
    pub fn wait(&self, n: u64, patience: Duration) -> Snapshot {
        let end = Instant::now() + patience;
        while self.answered.load(Ordering::Acquire) < n && Instant::now() < end {
            std::thread::sleep(Duration::from_micros(100));
        }
        self.copy.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_travel_as_text_and_unknown_names_survive() {
        let s = EndpointStats { calls: 7, mac_failures: 2, ..EndpointStats::default() };
        let text = s.to_text();
        assert!(text.starts_with("sessions_open 0\n"), "{text}");
        let mut parsed = parse_text(&(text + "from_a_newer_server 9\nnot a counter\n"));
        assert_eq!(parsed.pop(), Some(("from_a_newer_server".to_string(), 9)));
        assert_eq!(parsed.len(), s.fields().len());
        assert!(parsed.contains(&("calls".to_string(), 7)));
        assert!(parsed.contains(&("mac_failures".to_string(), 2)));
    }

    #[test]
    fn a_copy_answers_the_requests_made_before_it() {
        let board = StatsBoard::default();
        assert!(!board.wanted());
        let n = board.ask();
        assert!(board.wanted());
        board.publish(EndpointStats { calls: 3, ..Default::default() }, &[]);
        assert!(!board.wanted());
        assert_eq!(board.wait(n, Duration::ZERO).counters.calls, 3);
        // Nobody publishes: the wait gives up and returns the last copy.
        let n = board.ask();
        let t = Instant::now();
        assert_eq!(board.wait(n, Duration::from_millis(20)).counters.calls, 3);
        assert!(t.elapsed() >= Duration::from_millis(20));
    }
}
