//! What a slot does with each frame the server sends: checked (its tag, or sealed, opened),
//! matched to the call in flight, and then, by kind, a result (whole or in fragments), an
//! error, "still working", a fragment acknowledgement or a path challenge. A frame that fails
//! its tag is ignored and counted (`mac_failures`), as a lost one would be: the timers recover.
//! Over a reliable session [`SlotState::take_whole_result`] takes the common reply without
//! decoding it.

use std::time::Instant;

use super::outcome::{CallError, Outcome};
use super::slot::{ClientSlot, SlotState};
use crate::auth;
use crate::frag::Burst;
use crate::wire::{flags, ErrorCode, ErrorMessage, Header, Kind, PathChallenge, HEADER_LEN};

impl ClientSlot {
    /// Feeds one received frame, which arrived at `now()`: asked only on an unreliable
    /// session, whose timers (retransmission, acknowledgement) use the time; a reliable one's
    /// only timer is the deadline, so a reply there costs no clock read (~30 ns in a VM).
    ///
    /// A [`Kind::PathChallenge`] from the server (it heard this slot from an address the
    /// session had not proven: the client's address changed) is answered at once, and the
    /// call in flight sent again, so that the call completes a round trip later.
    pub fn handle<'a>(
        &'a mut self,
        frame: &'a [u8],
        now: impl FnOnce() -> Instant,
        out: &mut impl FnMut(&[u8], &[u8]),
    ) -> Option<Outcome<'a>> {
        let Ok((h, body)) = Header::parse(frame) else {
            self.state.ignored += 1;
            return None;
        };
        let (body, opened) = if h.flags & flags::SEALED == 0 {
            (body, false)
        } else {
            match self.opener.as_mut().and_then(|o| o.open(frame)) {
                Some(b) => (b, true),
                None => {
                    self.state.ignored += 1;
                    self.state.mac_failures += 1;
                    return None;
                }
            }
        };
        self.state.handle_opened(h, frame, body, opened, now, out)
    }
}

impl SlotState {
    /// [`ClientSlot::handle`] once a sealed frame is open (`opened`: `body` is its plaintext), in
    /// three steps: is the frame this slot's concern, does its tag pass, and then what its kind
    /// asks.
    fn handle_opened<'a>(
        &'a mut self,
        h: Header,
        frame: &'a [u8],
        body: &'a [u8],
        opened: bool,
        now: impl FnOnce() -> Instant,
        out: &mut impl FnMut(&[u8], &[u8]),
    ) -> Option<Outcome<'a>> {
        // On a reliable session no use of `now` below reaches a timer; the call's start will do.
        let now = if self.session.reliable { self.started } else { now() };
        // Cheap checks before the MAC: a frame for no call in flight is dropped unverified, as
        // before; only a path challenge concerns an idle slot too.
        let current = self.active && h.call_no == self.template.call_no;
        if h.token != self.session.token || h.slot != self.template.slot || !(current || h.kind == Kind::PathChallenge)
        {
            self.ignored += 1;
            return None;
        }
        let body = self.verify(&h, frame, body, opened)?;
        match h.kind {
            Kind::PathChallenge => {
                self.answer_challenge(&h, out);
                None
            }
            Kind::Result => self.on_result(&h, body, now, out),
            Kind::Error => Some(self.on_error(&h, body, now)),
            Kind::Working => {
                self.on_working(now);
                None
            }
            // Only for a call that went in fragments: over a reliable session a call that fits
            // one frame goes without the fragment sender (see `send_call`), so there is nothing
            // to acknowledge.
            Kind::FragAck if !self.rx_started && !self.sent_whole() => {
                self.on_frag_ack(&h, body, now, out);
                None
            }
            _ => {
                self.ignored += 1;
                None
            }
        }
    }

    /// The body of a frame for this slot once its tag has passed (an opened sealed frame has
    /// passed already); `None`, counted, when it has not.
    fn verify<'f>(&mut self, h: &Header, frame: &[u8], body: &'f [u8], opened: bool) -> Option<&'f [u8]> {
        let k = match &self.keys {
            // An unkeyed slot has no opener: `opened` is false there.
            None => return Some(body),
            Some(_) if opened => return Some(body),
            Some(k) => k,
        };
        // The server tags a session it does not know under the key's own; a sealed session
        // takes nothing else unsealed.
        let unknown = h.kind == Kind::Error && ErrorCode::from_u32(h.proc_or_code) == ErrorCode::UnknownSession;
        let verified = if unknown {
            auth::open(&k.unbound, frame, body)
        } else if self.sealer.is_some() {
            None
        } else {
            auth::open(&k.recv, frame, body)
        };
        if verified.is_none() {
            self.ignored += 1;
            self.mac_failures += 1;
        }
        verified
    }

    /// A result, whole (the call is done, where the frame lies: the common case, inlined into
    /// `handle`) or a fragment of one ([`on_result_fragment`](Self::on_result_fragment)).
    #[inline]
    fn on_result<'a>(
        &'a mut self,
        h: &Header,
        body: &'a [u8],
        now: Instant,
        out: &mut impl FnMut(&[u8], &[u8]),
    ) -> Option<Outcome<'a>> {
        self.heard = true;
        self.tx.mark_all_acked();
        if h.offset == 0 && body.len() == h.total_len as usize && !self.rx_started {
            // Over a reliable session no timer uses the round trip: nothing to learn.
            if self.retries == 0 && !self.working && !self.session.reliable {
                self.rtt.sample(now.saturating_duration_since(self.started));
            }
            self.finish(now);
            return Some(Outcome::Reply(body));
        }
        self.on_result_fragment(h, body, now, out)
    }

    /// A fragment of a result: the call is done once all are in; the server is told what came
    /// when it asks.
    #[inline(never)]
    fn on_result_fragment<'a>(
        &'a mut self,
        h: &Header,
        body: &'a [u8],
        now: Instant,
        out: &mut impl FnMut(&[u8], &[u8]),
    ) -> Option<Outcome<'a>> {
        if h.total_len > self.session.max_message {
            self.ignored += 1;
            return None;
        }
        if !self.rx_started {
            self.rx.reset(h.total_len, self.session.frag_size(), u32::from(self.session.window));
            self.rx_started = true;
        }
        if self.rx.accept(h.total_len, h.offset, body).is_err() {
            self.ignored += 1;
            return None;
        }
        if self.rx.is_complete() {
            self.finish(now);
            return Some(Outcome::Reply(self.rx.message()));
        }
        self.retries = 0;
        self.rto_at = self.rto_at.map(|_| now + self.rtt.rto());
        if h.flags & flags::REQ_ACK != 0 {
            self.send_frag_ack(0, out);
        }
        None
    }

    /// The server's error: a lost session (and whether the call may go again on a new one), or
    /// the procedure's failure in the server's words.
    fn on_error<'a>(&mut self, h: &Header, body: &'a [u8], now: Instant) -> Outcome<'a> {
        let code = ErrorCode::from_u32(h.proc_or_code);
        let outcome = if code == ErrorCode::UnknownSession {
            let restarted = h.offset as u16 != self.session.generation;
            // Refused on its first transmission, the call never ran here. Nor did it run on an
            // earlier incarnation of the server: over a reliable session the connection it went
            // on was opened to this one; over datagrams only if the server was the same one
            // throughout.
            let retry_safe = self.retries == 0 && (!restarted || self.session.reliable);
            Outcome::Failed(CallError::SessionLost { restarted, retry_safe })
        } else {
            Outcome::Remote { code, message: ErrorMessage::parse(body).map(|m| m.0) }
        };
        self.finish(now);
        self.ack_due = None; // errors are not kept for acknowledgement on the server
        outcome
    }

    /// The server has the whole call and is running it: stop retransmitting, ask again later.
    fn on_working(&mut self, now: Instant) {
        self.heard = true;
        self.working = true;
        self.tx.mark_all_acked();
        self.retries = 0;
        if self.rto_at.is_some() {
            self.rto_at = Some((now + self.cfg.working_probe.max(self.rtt.rto())).min(self.deadline));
        }
    }

    /// The server's acknowledgement of the call's fragments: the window moves on, and what it
    /// lacks goes again.
    fn on_frag_ack(&mut self, h: &Header, body: &[u8], now: Instant, out: &mut impl FnMut(&[u8], &[u8])) {
        let Some(bits) = body.get(..8) else {
            self.ignored += 1;
            return;
        };
        self.heard = true;
        let bitmap = u64::from_le_bytes(bits.try_into().unwrap_or([0; 8]));
        let mut pending = Burst::new();
        self.tx.on_ack(h.offset, bitmap, h.flags & flags::STALLED != 0, |i, r| pending.push(i, r));
        self.emit_pending(&pending, out);
        self.retries = 0;
        if self.rto_at.is_some() {
            self.rto_at = Some(now + self.rtt.rto());
        }
    }

    /// The fast path of a reliable session's reply: the result body, if `frame` is the current
    /// call's whole result with exactly the header the server sends for one
    /// ([`Header::whole_result`]); the call is then complete. Compared byte for byte, not
    /// decoded: over shared memory this is most of what a reply costs the client. `None` for
    /// anything else (and on an unreliable session): give the frame to [`handle`](ClientSlot::handle),
    /// which treats every case.
    #[inline]
    pub fn take_whole_result<'a>(&mut self, frame: &'a [u8]) -> Option<&'a [u8]> {
        if !self.session.reliable || self.keys.is_some() || !self.active || self.rx_started || !self.sent_whole() {
            return None;
        }
        let (head, body) = frame.split_first_chunk::<HEADER_LEN>()?;
        let len = u32::try_from(body.len()).ok()?;
        let expected = Header::whole_result(self.session.token, self.template.slot, self.template.call_no, len);
        if !expected.matches(head) {
            return None;
        }
        self.heard = true;
        // As `handle` does on a reliable session, where no timer uses the time.
        self.finish(self.started);
        Some(body)
    }

    /// Answers a path challenge from the server, then sends the call in flight again at once
    /// (the server answered it with nothing but the challenge).
    fn answer_challenge(&mut self, h: &Header, out: &mut impl FnMut(&[u8], &[u8])) {
        self.challenges_answered += 1;
        let response = PathChallenge::read(h).header(Kind::PathResponse, self.session.token, self.template.slot);
        self.guard().emit(response, &[], out);
        if self.active && !self.session.reliable {
            self.retransmissions += 1;
            self.resend(out);
        }
    }

    /// The call is over: the slot is free, and over datagrams acknowledges the result later
    /// unless the next call does first.
    fn finish(&mut self, now: Instant) {
        self.active = false;
        self.rto_at = None;
        if !self.session.reliable {
            self.ack_due = Some(now + self.cfg.ack_delay);
        }
    }
}
