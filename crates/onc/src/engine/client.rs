//! The client side: one call slot ([`ClientSlot`]) of a binding to one program and version.
//!
//! A slot carries one call at a time. Each call gets the next xid (the first drawn from the
//! configuration's seed); a reply counts only if it carries the current call's xid, so a late
//! answer to an earlier call is ignored. Over a datagram transport the slot sends the same
//! message (same xid) again after `first_retry`, then after twice that, ..., at most `max_retry`
//! apart, until the reply comes or the deadline passes; the server's duplicate-request cache keeps
//! the copies from running the procedure twice. Over a stream nothing is resent: the deadline is
//! the only timer.
//!
//! Contract, as for every engine in lowlat: put the arguments in [`ClientSlot::args_buf`], call
//! [`ClientSlot::start`]; feed every message received with [`ClientSlot::handle`], call
//! [`ClientSlot::handle_timeout`] once [`ClientSlot::poll_timeout`] has passed, and
//! [`ClientSlot::handle_refused`] when the transport reports that nobody listens at the server's
//! address (an ICMP port-unreachable on a connected UDP socket). Send what the `out` callback is
//! given (a header and a body, as one message). Each of these but `start` may end the call with an
//! [`Outcome`] or a [`CallError`]; a call the transport fails otherwise (a connection lost) ends
//! with [`ClientSlot::abandon`]. Nothing here reads a clock or touches a socket.

use core::time::Duration;
use std::time::Instant;

use crate::auth::Credential;
use crate::msg::{peek_xid, AcceptStatus, CallHeader, Reply, ReplyBody};
use crate::Error;

/// Byte offsets of the fields a call changes in its prefilled header.
mod field {
    use core::ops::Range;
    pub const XID: Range<usize> = 0..4;
    pub const MESSAGE_TYPE: Range<usize> = 4..8;
    pub const PROCEDURE: Range<usize> = 20..24;
}

/// `msg_type` of a reply.
const REPLY: u32 = 1;

/// How a slot calls.
#[derive(Clone, Copy, Debug)]
pub struct ClientSlotConfig {
    /// Whether the transport delivers every message in order (a stream): nothing is resent.
    pub reliable: bool,
    /// The first retransmission's delay; each further one doubles it.
    pub first_retry: Duration,
    /// Retransmissions are never further apart than this.
    pub max_retry: Duration,
    /// Largest call message (header and arguments) the transport carries.
    pub max_message: usize,
    /// Where the xids start (give it real randomness, so a restarted client does not reuse the
    /// xids a server's duplicate-request cache still holds).
    pub seed: u64,
}

impl Default for ClientSlotConfig {
    fn default() -> Self {
        ClientSlotConfig {
            reliable: false,
            first_retry: Duration::from_millis(100),
            max_retry: Duration::from_secs(2),
            max_message: 65_507,
            seed: 0x9E37_79B9_7F4A_7C15,
        }
    }
}

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// The arguments do not fit one call message: nothing was sent.
    TooLarge {
        /// Bytes of the call message the arguments would make.
        size: usize,
        /// Bytes a call message may have.
        max: usize,
    },
    /// The deadline passed without a reply. `sent`: the call left the client, so it may have run.
    Timeout {
        /// How long the call waited.
        after: Duration,
        /// The call left the client at least once.
        sent: bool,
    },
    /// Nobody listens at the server's address (the transport was refused).
    /// `may_have_executed` is false when the refused message was the call's only copy and no
    /// message of an earlier call was still unaccounted for: then the refusal is this call's, and
    /// the call reached no server.
    Refused {
        /// The server may have run the call (see above).
        may_have_executed: bool,
    },
    /// The server answered with a status other than SUCCESS.
    Rejected(ReplyBody),
    /// The server's reply to this call could not be read.
    Malformed(Error),
}

impl CallError {
    /// Whether the procedure may have run: false only when it is known not to have.
    pub fn may_have_executed(&self) -> bool {
        match self {
            CallError::TooLarge { .. } => false,
            CallError::Timeout { sent, .. } => *sent,
            CallError::Refused { may_have_executed } => *may_have_executed,
            // The procedure ran and failed, or the server cannot say how far it got.
            CallError::Rejected(ReplyBody::Accepted(AcceptStatus::SystemErr)) => true,
            CallError::Rejected(_) => false,
            CallError::Malformed(_) => true,
        }
    }
}

/// How a call ended.
#[derive(Debug)]
pub enum Outcome<'a> {
    /// SUCCESS: the results, where they lie in the reply.
    Reply(&'a [u8]),
    /// The call failed.
    Failed(CallError),
}

/// One call slot.
#[derive(Debug)]
pub struct ClientSlot {
    cfg: ClientSlotConfig,
    /// The call header with the credential, prefilled: a call writes its xid and procedure.
    head: Vec<u8>,
    args: Vec<u8>,
    xid: u32,
    active: bool,
    started: Instant,
    deadline: Instant,
    retry: Duration,
    retry_at: Option<Instant>,
    /// Copies of the current call sent.
    sent: u32,
    /// Every message of the calls before the current one was answered or refused, so a refusal
    /// now cannot be the late report of an earlier message.
    settled: bool,
    /// Messages that made no sense for this slot (stale or foreign replies); for diagnostics.
    pub ignored: u64,
    /// Copies sent again.
    pub retransmissions: u64,
}

fn splitmix(state: u64) -> u64 {
    let mut z = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl ClientSlot {
    /// A slot calling `program` `version` with `cred`; `now` only initialises its timers.
    pub fn new(program: u32, version: u32, cred: &Credential, cfg: ClientSlotConfig, now: Instant) -> ClientSlot {
        let mut head = Vec::with_capacity(64);
        CallHeader { xid: 0, program, version, procedure: 0 }.encode(cred, &mut head);
        ClientSlot {
            cfg,
            head,
            args: Vec::new(),
            xid: splitmix(cfg.seed) as u32,
            active: false,
            started: now,
            deadline: now,
            retry: cfg.first_retry,
            retry_at: None,
            sent: 0,
            settled: true,
            ignored: 0,
            retransmissions: 0,
        }
    }

    /// The buffer to encode the next call's arguments into (emptied; capacity kept).
    pub fn args_buf(&mut self) -> &mut Vec<u8> {
        self.args.clear();
        &mut self.args
    }

    /// The xid of the current (or last) call.
    pub fn xid(&self) -> u32 {
        self.xid
    }

    /// A call is in progress: started, and neither answered nor failed yet.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Length of the call header (with the credential) before the arguments.
    pub fn header_len(&self) -> usize {
        self.head.len()
    }

    /// Sends procedure `procedure` with the arguments in [`args_buf`](Self::args_buf), begun at
    /// `now`, to fail at `deadline`.
    pub fn start(
        &mut self,
        procedure: u32,
        now: Instant,
        deadline: Instant,
        out: &mut impl FnMut(&[u8], &[u8]),
    ) -> Result<(), CallError> {
        assert!(!self.active, "a slot carries one call at a time");
        let max = self.cfg.max_message.saturating_sub(self.head.len());
        if self.args.len() > max {
            return Err(CallError::TooLarge { size: self.args.len(), max });
        }
        self.xid = self.xid.wrapping_add(1);
        self.head[field::XID].copy_from_slice(&self.xid.to_be_bytes());
        self.head[field::PROCEDURE].copy_from_slice(&procedure.to_be_bytes());
        self.active = true;
        self.started = now;
        self.deadline = deadline;
        self.sent = 1;
        self.retry = self.cfg.first_retry;
        self.retry_at = (!self.cfg.reliable).then(|| (now + self.retry).min(deadline));
        out(&self.head, &self.args);
        Ok(())
    }

    /// Ends the current call; `accounted`: every copy sent is known to have been answered or
    /// refused.
    fn end(&mut self, accounted: bool) {
        self.active = false;
        self.retry_at = None;
        self.settled = accounted;
    }

    /// Feeds one message received. Returns the outcome once it is the reply to the current call.
    pub fn handle<'a>(&mut self, msg: &'a [u8]) -> Option<Outcome<'a>> {
        let is_reply = msg.get(field::MESSAGE_TYPE).is_some_and(|t| *t == REPLY.to_be_bytes());
        if !self.active || !is_reply || peek_xid(msg) != Some(self.xid) {
            self.ignored += 1;
            return None;
        }
        // One answer among several copies sent: the others' fates are unknown.
        self.end(self.sent == 1);
        Some(match Reply::parse(msg) {
            Ok(Reply { body: ReplyBody::Accepted(AcceptStatus::Success), results, .. }) => Outcome::Reply(results),
            Ok(r) => Outcome::Failed(CallError::Rejected(r.body)),
            Err(e) => Outcome::Failed(CallError::Malformed(e)),
        })
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.active.then(|| self.retry_at.map_or(self.deadline, |t| t.min(self.deadline)))
    }

    /// Runs the timers: retransmission and deadline.
    pub fn handle_timeout(&mut self, now: Instant, out: &mut impl FnMut(&[u8], &[u8])) -> Option<CallError> {
        if !self.active {
            return None;
        }
        if now >= self.deadline {
            self.end(false);
            return Some(CallError::Timeout {
                after: now.saturating_duration_since(self.started),
                sent: self.sent > 0,
            });
        }
        if self.retry_at.is_some_and(|t| now >= t) {
            self.sent += 1;
            self.retransmissions += 1;
            self.retry = (self.retry * 2).min(self.cfg.max_retry);
            self.retry_at = Some((now + self.retry).min(self.deadline));
            out(&self.head, &self.args);
        }
        None
    }

    /// Ends the current call for a reason of the transport's (a connection lost, a message that
    /// could not be sent): whatever was sent is unaccounted for, so the call may have run.
    pub fn abandon(&mut self) {
        if self.active {
            self.end(false);
        }
    }

    /// The transport says nobody listens at the server's address: the call fails at once. It
    /// reached no server if the refused copy can only have been its single one.
    pub fn handle_refused(&mut self) -> Option<CallError> {
        if !self.active {
            return None;
        }
        let only_copy = self.sent == 1 && self.settled;
        self.end(self.sent == 1);
        Some(CallError::Refused { may_have_executed: !only_copy })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{encode_accepted, Call};

    fn sent_to(log: &mut Vec<Vec<u8>>) -> impl FnMut(&[u8], &[u8]) + '_ {
        |h, b| log.push([h, b].concat())
    }

    fn reply(call: &[u8], status: AcceptStatus, results: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        encode_accepted(peek_xid(call).unwrap(), status, &mut r);
        r.extend_from_slice(results);
        r
    }

    #[test]
    fn calls_carry_the_prefilled_header_and_consecutive_xids() {
        let t0 = Instant::now();
        let mut s = ClientSlot::new(7, 3, &Credential::None, ClientSlotConfig::default(), t0);
        let mut log = Vec::new();
        for procedure in [4, 9] {
            s.args_buf().extend_from_slice(&[0, 0, 0, 5]);
            s.start(procedure, t0, t0 + Duration::from_secs(1), &mut sent_to(&mut log)).unwrap();
            let call = Call::parse(log.last().unwrap()).unwrap();
            assert_eq!((call.header.program, call.header.version, call.header.procedure), (7, 3, procedure));
            assert_eq!(call.args, [0, 0, 0, 5]);
            let r = reply(log.last().unwrap(), AcceptStatus::Success, b"ok");
            assert!(matches!(s.handle(&r), Some(Outcome::Reply(b"ok"))));
        }
        let xids: Vec<u32> = log.iter().map(|m| peek_xid(m).unwrap()).collect();
        assert_eq!(xids[1], xids[0].wrapping_add(1));
        // Another seed, other xids.
        let other = ClientSlot::new(7, 3, &Credential::None, ClientSlotConfig { seed: 1, ..Default::default() }, t0);
        assert_ne!(other.xid(), s.xid().wrapping_sub(2));
    }

    #[test]
    fn stale_and_foreign_messages_are_ignored() {
        let t0 = Instant::now();
        let mut s = ClientSlot::new(7, 1, &Credential::None, ClientSlotConfig::default(), t0);
        let mut log = Vec::new();
        s.start(0, t0, t0 + Duration::from_secs(1), &mut sent_to(&mut log)).unwrap();
        let first = reply(&log[0], AcceptStatus::Success, b"");
        assert!(matches!(s.handle(&first), Some(Outcome::Reply(_))));
        s.start(0, t0, t0 + Duration::from_secs(1), &mut sent_to(&mut log)).unwrap();
        // The first call's reply again, the call itself reflected back, and garbage.
        assert!(s.handle(&first).is_none());
        assert!(s.handle(&log[1]).is_none());
        assert!(s.handle(b"xy").is_none());
        assert_eq!(s.ignored, 3);
        assert!(s.is_active());
        // A reply that is ours but unreadable ends the call, typed.
        let mut bad = reply(&log[1], AcceptStatus::Success, b"");
        bad.truncate(12);
        assert!(matches!(s.handle(&bad), Some(Outcome::Failed(CallError::Malformed(_)))));
    }

    #[test]
    fn retransmits_with_back_off_until_the_deadline() {
        let t0 = Instant::now();
        let cfg = ClientSlotConfig {
            first_retry: Duration::from_millis(100),
            max_retry: Duration::from_millis(300),
            ..Default::default()
        };
        let mut s = ClientSlot::new(7, 1, &Credential::None, cfg, t0);
        let mut log = Vec::new();
        s.start(1, t0, t0 + Duration::from_secs(1), &mut sent_to(&mut log)).unwrap();
        let mut at = Vec::new();
        while let Some(t) = s.poll_timeout() {
            if let Some(e) = s.handle_timeout(t, &mut sent_to(&mut log)) {
                assert!(matches!(e, CallError::Timeout { sent: true, .. }), "{e:?}");
                assert!(e.may_have_executed());
                assert_eq!(t, t0 + Duration::from_secs(1));
                break;
            }
            at.push((t - t0).as_millis());
        }
        // 100, then 200, then 300 apart (the ceiling), until the deadline.
        assert_eq!(at, [100, 300, 600, 900]);
        assert!(log.iter().all(|m| m == &log[0]), "every copy is the same message, same xid");
        assert_eq!(log.len(), 5);
    }

    #[test]
    fn a_stream_resends_nothing() {
        let t0 = Instant::now();
        let cfg = ClientSlotConfig { reliable: true, ..Default::default() };
        let mut s = ClientSlot::new(7, 1, &Credential::None, cfg, t0);
        let mut log = Vec::new();
        s.start(1, t0, t0 + Duration::from_secs(3), &mut sent_to(&mut log)).unwrap();
        assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(3)));
        assert!(s.handle_timeout(t0 + Duration::from_secs(2), &mut sent_to(&mut log)).is_none());
        assert_eq!(log.len(), 1);
    }

    #[test]
    fn oversized_arguments_are_refused_before_sending() {
        let t0 = Instant::now();
        let cfg = ClientSlotConfig { max_message: 100, ..Default::default() };
        let mut s = ClientSlot::new(7, 1, &Credential::None, cfg, t0);
        let max = 100 - s.header_len();
        s.args_buf().resize(max + 1, 0);
        let e = s.start(1, t0, t0, &mut |_: &[u8], _: &[u8]| panic!("sent")).unwrap_err();
        assert!(matches!(e, CallError::TooLarge { size, max: m } if size == max + 1 && m == max), "{e:?}");
        assert!(!e.may_have_executed() && !s.is_active());
    }

    #[test]
    fn a_refusal_is_not_executed_only_when_it_can_only_be_this_calls() {
        let t0 = Instant::now();
        let mut s = ClientSlot::new(7, 1, &Credential::None, ClientSlotConfig::default(), t0);
        let mut sink = |_: &[u8], _: &[u8]| {};
        let deadline = t0 + Duration::from_secs(1);
        // The first copy refused: it reached no server.
        s.start(1, t0, deadline, &mut sink).unwrap();
        let e = s.handle_refused().unwrap();
        assert!(matches!(e, CallError::Refused { may_have_executed: false }) && !e.may_have_executed());
        assert!(s.handle_refused().is_none(), "an idle slot has no call to fail");
        // Refused after a retransmission: the first copy may have reached a server since gone.
        s.start(1, t0, deadline, &mut sink).unwrap();
        s.handle_timeout(t0 + Duration::from_millis(100), &mut sink);
        assert!(s.handle_refused().unwrap().may_have_executed());
        // That call left a copy unaccounted for, so the next call's refusal may be its report.
        s.start(1, t0, deadline, &mut sink).unwrap();
        assert!(s.handle_refused().unwrap().may_have_executed());
        // Now everything is accounted for again.
        s.start(1, t0, deadline, &mut sink).unwrap();
        assert!(!s.handle_refused().unwrap().may_have_executed());
        // So does an abandoned call.
        s.start(1, t0, deadline, &mut sink).unwrap();
        s.abandon();
        assert!(!s.is_active());
        s.start(1, t0, deadline, &mut sink).unwrap();
        assert!(s.handle_refused().unwrap().may_have_executed());
        // A timeout leaves its copies unaccounted for too.
        s.start(1, t0, deadline, &mut sink).unwrap();
        assert!(s.handle_timeout(deadline, &mut sink).is_some());
        s.start(1, deadline, deadline + Duration::from_secs(1), &mut sink).unwrap();
        assert!(s.handle_refused().unwrap().may_have_executed());
    }

    #[test]
    fn rejections_say_whether_the_procedure_ran() {
        let t0 = Instant::now();
        let mut s = ClientSlot::new(7, 1, &Credential::None, ClientSlotConfig::default(), t0);
        for (status, ran) in [
            (AcceptStatus::ProcUnavail, false),
            (AcceptStatus::GarbageArgs, false),
            (AcceptStatus::ProgMismatch { low: 1, high: 2 }, false),
            (AcceptStatus::SystemErr, true),
        ] {
            let mut log = Vec::new();
            s.start(1, t0, t0 + Duration::from_secs(1), &mut sent_to(&mut log)).unwrap();
            match s.handle(&reply(&log[0], status, b"")) {
                Some(Outcome::Failed(e @ CallError::Rejected(ReplyBody::Accepted(got)))) => {
                    assert_eq!(got, status);
                    assert_eq!(e.may_have_executed(), ran, "{status:?}");
                }
                other => panic!("{status:?}: {other:?}"),
            }
        }
    }
}
