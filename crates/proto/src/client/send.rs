//! Sending a call from a slot, and the timers that send it again or give up: a call goes whole
//! (a reliable session's, in one frame, without the fragment sender) or in windowed fragments;
//! over datagrams the slot retransmits what the server has not acknowledged, backing off, and
//! probes a call the server said is running. The client drives every retransmission: the
//! server only answers, so a server needs no timers per call.

use std::time::Instant;

use super::outcome::{CallError, Execution};
use super::slot::SlotState;
use crate::frag::Burst;
use crate::seal::Guard;
use crate::wire::{flags, Header, Kind, HEADER_LEN};

impl SlotState {
    /// Sends the call whose arguments are in [`args_buf`](Self::args_buf), begun at `now`, to
    /// fail at `deadline`.
    pub fn start(
        &mut self,
        proc_no: u32,
        now: Instant,
        deadline: Instant,
        out: &mut impl FnMut(&[u8], &[u8]),
    ) -> Result<(), CallError> {
        self.send_call(proc_no, out)?;
        self.time_call(now, deadline);
        Ok(())
    }

    /// [`start`](Self::start) in two halves, for a caller over a reliable session that reads the
    /// clock while the call travels instead of before sending it (off the critical path): sends
    /// the call; [`time_call`](Self::time_call) must follow before anything else is fed in,
    /// except over a reliable session, where nothing is timed but the deadline: there frames may
    /// come first (a reply that arrives before the caller has read the clock spares it the
    /// read), and `time_call` need only precede [`poll_timeout`](Self::poll_timeout) and
    /// [`handle_timeout`](Self::handle_timeout).
    pub fn send_call(&mut self, proc_no: u32, out: &mut impl FnMut(&[u8], &[u8])) -> Result<(), CallError> {
        if self.args.len() > self.session.max_message as usize {
            return Err(CallError::TooLarge { size: self.args.len(), max: self.session.max_message });
        }
        self.begin(proc_no, self.args.len() as u32);
        self.placed = false;
        if self.sent_whole() {
            // A reliable session's fragment is as large as its messages: the call goes in one
            // frame, as the fragment sender would send it, without setting the sender up
            // (nothing is retransmitted or acknowledged by fragment on such a session).
            let t = &self.template;
            let h = Header::whole_call(t.token, t.slot, t.call_no, proc_no, self.args.len() as u32);
            Guard::of(self.keys.as_ref().map(|k| &k.send), self.sealer.as_mut()).emit(h, &self.args, out);
            return Ok(());
        }
        self.tx.reset(self.args.len() as u32, self.session.frag_size(), self.session.window as u32);
        if let Some(req_ack) = self.tx.send_single() {
            self.emit_frag(0, req_ack, false, out);
            return Ok(());
        }
        // The window is at most 64 fragments (enforced at bind), so one burst fits here.
        // Collect first, then emit: `send_new` borrows the sender, emitting borrows the args.
        let mut burst = Burst::new();
        self.tx.send_new(|i, r| burst.push(i, r));
        for (i, r) in burst.iter() {
            self.emit_frag(i, r, false, out);
        }
        Ok(())
    }

    /// [`send_call`](Self::send_call) for arguments already written where the server will read
    /// them, `len` bytes after room for the header (a shared-memory call ring's record, so
    /// that they are written once): writes the header before them into `head`, which makes the
    /// frame complete, and returns `true`. Only a call that goes as one untagged frame can go
    /// so (a reliable, unkeyed session, the arguments within its limits); for any other, `false`
    /// and nothing changed (`head` neither): put the arguments in [`args_buf`](Self::args_buf)
    /// and `send_call`. The arguments are not kept ([`args`](Self::args) is `None`): a call sent
    /// again after a rebind needs them from where they were written.
    #[inline]
    pub fn place_call(&mut self, proc_no: u32, len: usize, head: &mut [u8; HEADER_LEN]) -> bool {
        let fits = len <= self.session.max_message as usize && len <= self.session.frag_size() as usize;
        if !self.session.reliable || self.keys.is_some() || !fits {
            return false;
        }
        self.begin(proc_no, len as u32);
        self.args.clear();
        self.placed = true;
        let t = &self.template;
        Header::whole_call(t.token, t.slot, t.call_no, proc_no, len as u32).emit(head);
        true
    }

    /// Starts the clock of the call just sent: it began at `now` and fails at `deadline`.
    #[inline]
    pub fn time_call(&mut self, now: Instant, deadline: Instant) {
        self.started = now;
        self.deadline = deadline;
        self.rto_at = if self.session.reliable { None } else { Some(now + self.rtt.rto()) };
    }

    /// Gives up the call in flight without an outcome from the engine: the caller's channel
    /// failed (connection lost, peer dead) and it reports the failure itself. The slot is free
    /// for the next call, whose new call number makes anything still coming for this one stale;
    /// nothing of it is acknowledged or retransmitted.
    pub fn abandon(&mut self) {
        self.active = false;
        self.rto_at = None;
        self.ack_due = None;
    }

    /// When `handle_timeout` should next be called.
    #[inline]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.active {
            Some(self.rto_at.map_or(self.deadline, |t| t.min(self.deadline)))
        } else {
            self.ack_due
        }
    }

    /// Runs timers: retransmission, deadline, delayed acknowledgement.
    pub fn handle_timeout(&mut self, now: Instant, out: &mut impl FnMut(&[u8], &[u8])) -> Option<CallError> {
        if !self.active {
            if self.ack_due.is_some_and(|t| now >= t) {
                self.ack_due = None;
                self.send_control(Kind::Ack, 0, &[], out);
            }
            return None;
        }
        if now >= self.deadline {
            self.active = false;
            self.rto_at = None;
            let execution = if self.heard { Execution::Started } else { Execution::Unknown };
            return Some(CallError::Timeout { after: now - self.started, execution });
        }
        let t = self.rto_at?;
        if now < t {
            return None;
        }
        self.retries += 1;
        self.retransmissions += 1;
        self.resend(out);
        let next = if self.working {
            self.cfg.working_probe.max(self.rtt.backed_off(self.retries))
        } else {
            self.rtt.backed_off(self.retries)
        };
        self.rto_at = Some((now + next).min(self.deadline));
        None
    }

    /// The state of a new call of `proc_no` with `len` bytes of arguments, not yet sent.
    #[inline]
    pub(super) fn begin(&mut self, proc_no: u32, len: u32) {
        assert!(!self.active, "a slot carries one call at a time");
        self.template.kind = Kind::Call;
        self.template.call_no = self.template.call_no.wrapping_add(1);
        self.template.proc_or_code = proc_no;
        self.template.total_len = len;
        self.calls += 1;
        self.ack_due = None; // this call acknowledges the previous result
        self.rx_started = false;
        self.active = true;
        self.retries = 0;
        self.heard = false;
        self.working = false;
    }

    /// Whether the current call goes (went) as one frame without the fragment sender: over a
    /// reliable session, whose fragments are as large as its messages.
    pub(super) fn sent_whole(&self) -> bool {
        self.session.reliable && self.template.total_len <= self.session.frag_size()
    }

    pub(super) fn guard(&mut self) -> Guard<'_> {
        Guard::of(self.keys.as_ref().map(|k| &k.send), self.sealer.as_mut())
    }

    /// Sends again what the server has not acknowledged of the call in flight: fragments,
    /// a probe for a call sent whole, or a stalled acknowledgement of a result half received.
    pub(super) fn resend(&mut self, out: &mut impl FnMut(&[u8], &[u8])) {
        if self.rx_started {
            self.send_frag_ack(flags::STALLED | flags::RETRANSMIT, out);
        } else if self.tx.is_complete() {
            self.send_control(Kind::Probe, flags::RETRANSMIT, &[], out);
        } else {
            let mut pending = Burst::new();
            self.tx.resend_unacked(|i, r| pending.push(i, r));
            // A lost tail of a burst shows up as a full collection: ask for an ack on the last.
            pending.req_ack_on_last();
            self.emit_pending(&pending, out);
        }
    }

    pub(super) fn emit_frag(&mut self, i: u32, req_ack: bool, retransmit: bool, out: &mut impl FnMut(&[u8], &[u8])) {
        let r = self.tx.range(i);
        let mut h = self.template;
        h.offset = r.start as u32;
        h.flags = if req_ack { flags::REQ_ACK } else { 0 } | if retransmit { flags::RETRANSMIT } else { 0 };
        Guard::of(self.keys.as_ref().map(|k| &k.send), self.sealer.as_mut()).emit(h, &self.args[r], out);
    }

    pub(super) fn emit_pending(&mut self, pending: &Burst, out: &mut impl FnMut(&[u8], &[u8])) {
        for (i, r) in pending.iter() {
            self.emit_frag(i, r, true, out);
        }
    }

    pub(super) fn send_control(&mut self, kind: Kind, fl: u8, body: &[u8], out: &mut impl FnMut(&[u8], &[u8])) {
        let mut h = self.template;
        h.kind = kind;
        h.flags = fl;
        h.total_len = body.len() as u32;
        h.offset = 0;
        self.guard().emit(h, body, out);
    }

    pub(super) fn send_frag_ack(&mut self, fl: u8, out: &mut impl FnMut(&[u8], &[u8])) {
        let (cum, bitmap) = self.rx.ack_state();
        let mut h = self.template;
        h.kind = Kind::FragAck;
        h.flags = fl;
        h.total_len = self.rx.total();
        h.offset = cum;
        self.guard().emit(h, &bitmap.to_le_bytes(), out);
    }
}
