//! The client side: the binding handshake ([`Binder`]) and one call slot ([`ClientSlot`]).
//!
//! A slot carries one call at a time. Its call number increases with every call; a new call
//! acknowledges the previous result (implicit acknowledgement), and an idle slot acknowledges
//! its last result explicitly after a short delay. The client drives every retransmission: the
//! server only answers, so a server needs no timers per call.
//!
//! Contract, as for every engine in this crate: feed frames with `handle`, call `handle_timeout`
//! when `poll_timeout` has passed, and send what the `out` callback is given (a header, 32 bytes
//! or 48 with a keyed session's tag, and a body, to be sent as one frame). Nothing here reads a
//! clock or touches a socket.
//!
//! Binding answers the server's cookie round at once (`BindRetry`: the same request again, with
//! the cookie and, holding a pre-shared key, the proof of it). A keyed session's frames are
//! tagged on the way out and checked on the way in: a frame whose tag fails is ignored and
//! counted (`mac_failures`), as a lost one would be, and the retransmission timers recover.
//!
//! In parts, one idea each:
//!
//! - `bind`: the binding handshake ([`Binder`]) and what it yields ([`Session`], [`Bound`]);
//! - `slot`: a call slot ([`ClientSlot`]) and what it holds between calls;
//! - `send`: sending a call, and the timers that send it again or give up;
//! - `receive`: what a slot does with each frame the server sends;
//! - `outcome`: how a call ends ([`Outcome`], [`CallError`], [`Execution`]).

mod bind;
mod outcome;
mod receive;
mod send;
mod slot;

use core::time::Duration;

pub use bind::{BindError, Binder, Bound, Session};
pub use outcome::{CallError, Execution, Outcome};
pub use slot::{ClientSlot, SlotState};

/// Timing knobs of a client.
#[derive(Clone, Copy, Debug)]
pub struct ClientEngineConfig {
    /// Retransmission timeout before any round trip has been measured.
    pub initial_rto: Duration,
    /// The timeout never drops below this, however fast the round trips.
    pub min_rto: Duration,
    /// Nor grows above this with back-off.
    pub max_rto: Duration,
    /// How long an idle slot waits before acknowledging its last result explicitly.
    pub ack_delay: Duration,
    /// How often to ask about a call the server said is still running.
    pub working_probe: Duration,
}

impl Default for ClientEngineConfig {
    fn default() -> Self {
        ClientEngineConfig {
            initial_rto: Duration::from_millis(20),
            min_rto: Duration::from_millis(1),
            max_rto: Duration::from_secs(1),
            ack_delay: Duration::from_millis(20),
            working_probe: Duration::from_millis(200),
        }
    }
}
