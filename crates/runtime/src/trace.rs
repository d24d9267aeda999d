//! Timestamps for accounting: where the time of a call goes (`lowlat account`).
//!
//! With tracing on (`ClientConfig::trace`, `ServerConfig::trace`), the client notes five moments of
//! each call and the server four, all on `CLOCK_MONOTONIC`, which every process on a host shares.
//! With tracing off, each moment costs one not-taken branch and nothing is stored.
//!
//! The client's record of the thread's last call is [`last_client_trace`]. The server keeps its
//! records in a ring owned by the serving thread; an inline procedure (which runs on that thread)
//! reads and empties it with [`take_server_traces`].

use std::cell::{Cell, RefCell};

/// Nanoseconds on `CLOCK_MONOTONIC`.
pub fn now_ns() -> u64 {
    lowlat_sys::clock::monotonic_ns()
}

/// The client's moments of one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientTrace {
    /// The session token of the call's binding.
    pub token: u64,
    /// The call slot the call went in.
    pub slot: u16,
    /// The call's number on its slot; with `token` and `slot`, matches a client record to the
    /// server's.
    pub call_no: u32,
    /// The call began (before the arguments were encoded).
    pub begin: u64,
    /// The arguments were encoded; the engine is about to send.
    pub encoded: u64,
    /// The send system call returned.
    pub sent: u64,
    /// The frame completing the result was received.
    pub received: u64,
    /// The result was decoded; the call returns.
    pub end: u64,
}

/// The server's moments of one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerTrace {
    /// The session token of the call's binding.
    pub token: u64,
    /// The call slot the call went in.
    pub slot: u16,
    /// The call's number on its slot; with `token` and `slot`, matches a client record to the
    /// server's.
    pub call_no: u32,
    /// The frame completing the call was received.
    pub received: u64,
    /// The procedure is about to run (header interpreted, procedure found).
    pub dispatched: u64,
    /// The procedure returned.
    pub returned: u64,
    /// The reply's send system call returned.
    pub replied: u64,
}

impl ServerTrace {
    /// Size of one record in [`encode`](Self::encode)'s format.
    pub const WIRE_LEN: usize = 48;

    /// Little-endian fixed record, for shipping records to the client.
    pub fn encode(&self, out: &mut impl lowlat_codec::Sink) {
        out.extend_from_slice(&self.token.to_le_bytes());
        out.extend_from_slice(&(self.slot as u32).to_le_bytes());
        out.extend_from_slice(&self.call_no.to_le_bytes());
        for t in [self.received, self.dispatched, self.returned, self.replied] {
            out.extend_from_slice(&t.to_le_bytes());
        }
    }

    /// Reads records written by [`encode`](Self::encode); a trailing partial record is ignored.
    pub fn decode_all(b: &[u8]) -> Vec<ServerTrace> {
        let u64_at = |c: &[u8], i: usize| u64::from_le_bytes(c[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |c: &[u8], i: usize| u32::from_le_bytes(c[i..i + 4].try_into().expect("4 bytes"));
        b.chunks_exact(Self::WIRE_LEN)
            .map(|c| ServerTrace {
                token: u64_at(c, 0),
                slot: u32_at(c, 8) as u16,
                call_no: u32_at(c, 12),
                received: u64_at(c, 16),
                dispatched: u64_at(c, 24),
                returned: u64_at(c, 32),
                replied: u64_at(c, 40),
            })
            .collect()
    }
}

/// Records kept per serving thread before the oldest are overwritten.
const SERVER_RING: usize = 1 << 16;

thread_local! {
    static LAST_CLIENT: Cell<ClientTrace> = const { Cell::new(ClientTrace {
        token: 0, slot: 0, call_no: 0, begin: 0, encoded: 0, sent: 0, received: 0, end: 0,
    }) };
    static SERVER: RefCell<(Vec<ServerTrace>, usize)> = const { RefCell::new((Vec::new(), 0)) };
}

/// The calling thread's last traced call (all zero if none).
pub fn last_client_trace() -> ClientTrace {
    LAST_CLIENT.with(|c| c.get())
}

pub(crate) fn set_client_trace(t: ClientTrace) {
    LAST_CLIENT.with(|c| c.set(t));
}

pub(crate) fn push_server_trace(t: ServerTrace) {
    SERVER.with(|s| {
        let (ring, next) = &mut *s.borrow_mut();
        if ring.len() < SERVER_RING {
            ring.push(t);
        } else {
            ring[*next % SERVER_RING] = t;
        }
        *next += 1;
    });
}

/// Takes up to `max` of the serving thread's records (oldest first). Call it from an inline
/// procedure: only the serving thread sees its records.
pub fn take_server_traces(max: usize) -> Vec<ServerTrace> {
    SERVER.with(|s| {
        let (ring, next) = &mut *s.borrow_mut();
        let n = ring.len().min(max);
        let out: Vec<ServerTrace> = if ring.len() < SERVER_RING {
            ring.drain(..n).collect()
        } else {
            // A full ring: the oldest record is at `next`.
            let start = *next % SERVER_RING;
            let mut v: Vec<ServerTrace> = ring[start..].iter().chain(&ring[..start]).copied().collect();
            let rest = v.split_off(n);
            *ring = rest;
            v
        };
        if ring.len() < SERVER_RING {
            *next = ring.len();
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_records_round_trip_and_drain_in_order() {
        for i in 0..5u32 {
            push_server_trace(ServerTrace { call_no: i, received: i as u64, ..Default::default() });
        }
        let first = take_server_traces(3);
        assert_eq!(first.iter().map(|t| t.call_no).collect::<Vec<_>>(), [0, 1, 2]);
        let mut b = Vec::new();
        for t in &first {
            t.encode(&mut b);
        }
        assert_eq!(ServerTrace::decode_all(&b), first);
        assert_eq!(take_server_traces(10).len(), 2);
        assert!(take_server_traces(10).is_empty());
        let a = now_ns();
        assert!(now_ns() >= a);
    }
}
