//! One session's state on the server, quinn's `Connection` to the endpoint's `Endpoint`: its
//! keys, its terms, and per slot the last call number, the call's reassembly and its kept
//! result. Here is the at-most-once rule: a duplicate of a finished call gets the saved result
//! again, a duplicate of a running call gets "still working", anything older is dropped, so a
//! procedure never runs twice for one call.
//!
//! Nothing here makes or finds sessions (`sessions`), answers binds or owns the server's
//! secret (`endpoint`): a frame reaches a session already matched to it by its token.

use std::time::Instant;

use super::call::{CallKey, IncomingCall, Status};
use super::stats::ServerStats;
use crate::auth::{self, FrameKeys, ServerSecret, Tag};
use crate::frag::{Burst, FragReceiver, FragSender};
use crate::seal::{head_len, Guard, Opener, Sealer};
use crate::wire::{flags, ByteOrder, ErrorCode, ErrorMessage, Header, Kind, PathChallenge, WholeCall, HEADER_LEN};

/// Results larger than this are released when acknowledged, not kept for the next call.
const KEEP_CAPACITY: usize = 256 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Empty,
    Receiving,
    Running,
    Done(Status),
    Acked,
}

#[derive(Debug)]
pub(super) struct Slot<A> {
    /// Where the slot's answers go. Over datagrams only a proven address: the bind's, or one
    /// that answered a path challenge on this slot (a client may call from a socket per slot).
    /// A frame from any other address is answered with a challenge only (QUIC's address
    /// validation, RFC 9000 §8-9).
    pub(super) peer: Option<A>,
    pub(super) call_no: u32,
    pub(super) phase: Phase,
    rx: FragReceiver,
    result: Vec<u8>,
    tx: FragSender,
}

/// What a bind settled for the whole session, read on every call; apart from the slots and the
/// keys so that a slot can be changed while they are read.
#[derive(Clone, Copy, Debug)]
pub(super) struct Terms {
    pub(super) token: u64,
    pub(super) program: u32,
    pub(super) version: u32,
    pub(super) client_order: ByteOrder,
    pub(super) reliable: bool,
    pub(super) frag_size: u32,
    pub(super) window: u16,
    pub(super) max_message: u32,
}

#[derive(Debug)]
pub(super) struct Session<A> {
    pub(super) terms: Terms,
    pub(super) nonce: u64,
    /// The cookie's MAC the session was made with (zero without a cookie round): a bind
    /// repeated with another cookie is another bind.
    pub(super) server_nonce: Tag,
    /// Over datagrams, proven by the bind's cookie round: frames from it are answered on any slot.
    pub(super) bind_peer: A,
    /// The source `bind_peer` counts against.
    pub(super) source: u128,
    /// Frame keys, on a session bound with a pre-shared key.
    pub(super) keys: Option<FrameKeys>,
    /// On a sealed session: what seals the frames sent (the keys' tags are then unused, but for
    /// `UnknownSession`)...
    pub(super) seal_send: Option<Sealer>,
    /// ... and what opens the frames received.
    pub(super) seal_recv: Option<Opener>,
    pub(super) bound_at: Instant,
    /// A time at or after the session's last frame: its bind, or the sweep that found it
    /// `active`.
    pub(super) last_active: Instant,
    /// A frame came since the last sweep. A flag rather than a time, so that serving a call
    /// reads no clock.
    pub(super) active: bool,
    pub(super) slots: Vec<Slot<A>>,
}

impl<A> Slot<A> {
    pub(super) fn new() -> Slot<A> {
        Slot {
            peer: None,
            call_no: 0,
            phase: Phase::Empty,
            rx: FragReceiver::default(),
            result: Vec::new(),
            tx: FragSender::default(),
        }
    }

    /// Bytes held for the result and the reassembly.
    pub(super) fn buffered_bytes(&self) -> usize {
        self.result.capacity() + self.rx.message().len()
    }
}

impl<A> Session<A> {
    /// Whether any call ever came on this session.
    pub(super) fn called(&self) -> bool {
        self.slots.iter().any(|s| s.phase != Phase::Empty)
    }

    /// How willing the server is to give this session up for a new one, lowest first: sessions
    /// that never called, then those quiet since the last sweep, the longest quiet first. `None`
    /// while a call is arriving or running.
    pub(super) fn reclaim_rank(&self) -> Option<(bool, bool, Instant)> {
        (!self.busy())
            .then(|| (self.called(), self.active, if self.called() { self.last_active } else { self.bound_at }))
    }

    /// A slot that still needs the session alive: a call arriving or running. Such a session is
    /// never swept (its procedure will finish), so nothing but new work need keep it live.
    pub(super) fn busy(&self) -> bool {
        self.slots.iter().any(|s| matches!(s.phase, Phase::Receiving | Phase::Running))
    }

    /// Bytes before a body in each frame: the header, the tag on a keyed session, the sequence
    /// number on a sealed one.
    pub(super) fn head_len(&self) -> u32 {
        head_len(self.keys.is_some(), self.seal_send.is_some()) as u32
    }

    /// The slot of `key` if the call it names is running there.
    pub(super) fn running(&mut self, key: CallKey) -> Option<usize> {
        let slot = self.slots.get(key.slot as usize)?;
        (slot.call_no == key.call_no && slot.phase == Phase::Running).then_some(key.slot as usize)
    }
}

impl<A: Copy + Eq + core::hash::Hash> Session<A> {
    /// The session's part of [`ServerEngine::handle`](super::ServerEngine::handle), for a frame
    /// (not a bind) whose token names this session, in four steps: its tag is checked, its slot
    /// found, its address proven, and then what its kind asks is done by the slot. A frame
    /// changes the session's state, its liveness included, only once its tag and its call
    /// number have passed: a replay changes nothing.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) fn handle<'a>(
        &'a mut self,
        from: A,
        h: &Header,
        frame: &'a [u8],
        body: &'a [u8],
        secret: &mut ServerSecret,
        now: impl FnOnce() -> Instant,
        stats: &mut ServerStats,
        out: &mut impl FnMut(&A, &[u8], &[u8]),
    ) -> Option<IncomingCall<'a>> {
        // Nothing of a frame is believed before its tag is checked.
        let body = open(self.keys.as_ref(), self.seal_recv.as_mut(), h, frame, body, stats)?;
        let mut guard = Guard::of(self.keys.as_ref().map(|k| &k.send), self.seal_send.as_mut());
        let terms = &self.terms;
        let Some(slot) = self.slots.get_mut(h.slot as usize) else {
            stats.malformed += 1;
            return None;
        };
        if !terms.reliable && slot.peer != Some(from) && from != self.bind_peer {
            slot.prove_path(from, terms.token, h, frame.len(), secret, now(), &mut guard, stats, out);
            return None;
        }
        if h.flags & flags::RETRANSMIT != 0 {
            stats.retransmits_received += 1;
        }
        slot.peer = Some(from);
        let g = &mut guard;
        match h.kind {
            Kind::Call => slot.on_call(terms, &mut self.active, h, body, g, stats, out),
            Kind::Probe if h.call_no == slot.call_no => {
                slot.on_probe(terms, h.slot, g, stats, out);
                None
            }
            Kind::Ack if h.call_no == slot.call_no => {
                if matches!(slot.phase, Phase::Done(_)) {
                    self.active = true;
                    slot.phase = Phase::Acked;
                    slot.release();
                }
                None
            }
            Kind::FragAck if h.call_no == slot.call_no => {
                slot.on_frag_ack(terms.token, h, body, g, out);
                None
            }
            // A response from the proven address itself: nothing to prove.
            Kind::PathResponse => None,
            _ => {
                stats.malformed += 1;
                None
            }
        }
    }

    /// [`ServerEngine::take_whole_call`](super::ServerEngine::take_whole_call) once the session
    /// is found: the call `c` runs if it is the next on its slot, which rests between calls.
    #[inline]
    pub(super) fn take_whole_call<'a>(
        &'a mut self,
        from: A,
        c: WholeCall,
        args: &'a [u8],
        stats: &mut ServerStats,
    ) -> Option<IncomingCall<'a>> {
        let terms = &self.terms;
        // A keyed session's frames carry a tag: the general path checks it.
        if !terms.reliable || self.keys.is_some() || args.len() > terms.max_message as usize {
            return None;
        }
        let slot = self.slots.get_mut(c.slot as usize)?;
        // The slot's next call, on a slot resting acknowledged between calls (or empty before
        // its first), as a reliable session's slots do.
        if c.call_no != slot.call_no.wrapping_add(1) || !matches!(slot.phase, Phase::Acked | Phase::Empty) {
            return None;
        }
        self.active = true;
        slot.peer = Some(from);
        slot.call_no = c.call_no;
        stats.calls += 1;
        Some(slot.run(terms, c.slot, c.proc_no, Some(args)))
    }

    /// Completes the call running on slot `i` (see [`running`](Self::running)) whose result
    /// is in the slot's reply buffer, and sends the result.
    pub(super) fn finish(&mut self, i: usize, status: Status, out: &mut impl FnMut(&A, &[u8], &[u8])) {
        let terms = &self.terms;
        let mut guard = Guard::of(self.keys.as_ref().map(|k| &k.send), self.seal_send.as_mut());
        let slot = &mut self.slots[i];
        let slot_no = i as u16;
        // A result larger than the session allows is refused, as an oversized call is.
        let status = match status {
            Status::Ok if slot.result.len() > terms.max_message as usize => {
                slot.result.clear();
                Status::Error(ErrorCode::TooLarge)
            }
            s => s,
        };
        slot.phase = Phase::Done(status);
        if terms.reliable && status == Status::Ok && slot.result.len() <= terms.frag_size as usize {
            // A reliable session's fragment is as large as its messages: the result goes in one
            // frame, as `send_result` would send it, without setting up the fragment sender
            // (nothing is retransmitted or acknowledged by fragment on such a session).
            if let Some(peer) = slot.peer.as_ref() {
                let h = Header::whole_result(terms.token, slot_no, slot.call_no, slot.result.len() as u32);
                guard.emit(h, &slot.result, &mut |hd, b| out(peer, hd, b));
            }
        } else {
            slot.send_result(&mut guard, terms, slot_no, out);
        }
        if terms.reliable || matches!(status, Status::Error(_)) {
            // Nothing to retransmit on a reliable stream; errors are cheap to recompute.
            slot.phase = Phase::Acked;
            slot.release();
        }
    }

    /// [`ServerEngine::finish_placed`](super::ServerEngine::finish_placed) for the call running
    /// on slot `i`.
    #[inline]
    pub(super) fn finish_placed(&mut self, i: usize, status: Status, len: usize, head: &mut [u8; HEADER_LEN]) -> bool {
        let terms = &self.terms;
        if !terms.reliable
            || self.keys.is_some()
            || status != Status::Ok
            || len > terms.max_message as usize
            || len > terms.frag_size as usize
        {
            return false;
        }
        let slot = &mut self.slots[i];
        if slot.peer.is_none() {
            return false;
        }
        Header::whole_result(terms.token, i as u16, slot.call_no, len as u32).emit(head);
        slot.phase = Phase::Acked;
        slot.release();
        true
    }

    /// Puts `result`, produced elsewhere, in slot `i`'s reply buffer.
    pub(super) fn set_result(&mut self, i: usize, result: &[u8]) {
        let slot = &mut self.slots[i];
        slot.result.clear();
        slot.result.extend_from_slice(result);
    }
}

/// The body of `frame` once its tag (or, sealed, its AEAD) has passed under the session's keys;
/// `None`, counted, when it has not. Takes the keys and the opener rather than the session, so
/// that the opened body, which may lie in the opener, leaves the slots free to change.
#[inline]
fn open<'a>(
    keys: Option<&FrameKeys>,
    opener: Option<&'a mut Opener>,
    h: &Header,
    frame: &'a [u8],
    body: &'a [u8],
    stats: &mut ServerStats,
) -> Option<&'a [u8]> {
    let opened = match (keys, opener) {
        (None, _) if h.flags & flags::TAGGED != 0 => {
            stats.malformed += 1;
            return None;
        }
        (None, _) => return Some(body),
        (Some(_), Some(opener)) => opener.open(frame),
        (Some(k), None) => auth::open(&k.recv, frame, body),
    };
    if opened.is_none() {
        stats.mac_failures += 1;
    }
    opened
}

impl<A: Copy + Eq + core::hash::Hash> Slot<A> {
    /// A frame from an address this slot has not proven: a response to a challenge proves it;
    /// anything else is answered with a challenge (no larger than the frame), and changes
    /// nothing.
    #[allow(clippy::too_many_arguments)]
    fn prove_path(
        &mut self,
        from: A,
        token: u64,
        h: &Header,
        frame_len: usize,
        secret: &mut ServerSecret,
        now: Instant,
        guard: &mut Guard<'_>,
        stats: &mut ServerStats,
        out: &mut impl FnMut(&A, &[u8], &[u8]),
    ) {
        if h.kind == Kind::PathResponse {
            if secret.check_path(&from, token, &PathChallenge::read(h), now) {
                self.peer = Some(from);
                stats.paths_validated += 1;
            } else {
                stats.path_failures += 1;
            }
            return;
        }
        stats.unproven += 1;
        let challenge = secret.path_challenge(&from, token, now);
        if guard.head_len() <= frame_len {
            stats.path_challenges += 1;
            guard.emit(challenge.header(Kind::PathChallenge, h.token, h.slot), &[], &mut |hd, b| out(&from, hd, b));
        } else {
            stats.withheld += 1;
        }
    }
}

impl<A> Slot<A> {
    /// A call frame (whole, or a fragment): a new call starts (and acknowledges the previous
    /// result), a copy of the current one is answered as its phase says, an older one dropped.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn on_call<'a>(
        &'a mut self,
        terms: &Terms,
        active: &mut bool,
        h: &Header,
        body: &'a [u8],
        g: &mut Guard<'_>,
        stats: &mut ServerStats,
        out: &mut impl FnMut(&A, &[u8], &[u8]),
    ) -> Option<IncomingCall<'a>> {
        if h.call_no.wrapping_sub(self.call_no) as i32 > 0 || self.phase == Phase::Empty {
            // A new call: it acknowledges the previous result, and shows the session alive (a
            // replay never gets here: its number is not new).
            *active = true;
            if h.total_len > terms.max_message {
                stats.too_large += 1;
                self.call_no = h.call_no;
                self.result.clear();
                self.phase = Phase::Done(Status::Error(ErrorCode::TooLarge));
                self.send_result(g, terms, h.slot, out);
                return None;
            }
            self.call_no = h.call_no;
            stats.calls += 1;
            if h.offset == 0 && body.len() == h.total_len as usize {
                // The fast path: a single-frame call runs where it lies.
                return Some(self.run(terms, h.slot, h.proc_or_code, Some(body)));
            }
            self.rx.reset(h.total_len, terms.frag_size, u32::from(terms.window));
            self.phase = Phase::Receiving;
        } else if h.call_no != self.call_no {
            stats.stale += 1;
            return None; // older than the current call: a stale duplicate
        }
        match self.phase {
            Phase::Receiving => {
                stats.fragments_received += 1;
                if self.rx.accept(h.total_len, h.offset, body).is_err() {
                    stats.malformed += 1;
                    return None;
                }
                if self.rx.is_complete() {
                    return Some(self.run(terms, h.slot, h.proc_or_code, None));
                }
                if h.flags & flags::REQ_ACK != 0 {
                    self.send_frag_ack(g, terms.token, h.slot, out);
                }
                None
            }
            Phase::Running if h.flags & flags::REQ_ACK != 0 => {
                stats.working += 1;
                self.send_simple(g, Kind::Working, terms.token, h.slot, out);
                None
            }
            Phase::Done(_) if h.flags & flags::REQ_ACK != 0 => {
                stats.duplicates += 1;
                self.send_result(g, terms, h.slot, out);
                None
            }
            _ => {
                stats.stale += 1;
                None
            }
        }
    }

    /// The call of this slot's current number starts running, on `args` where they lie, or
    /// (`None`) on the reassembled message.
    #[inline]
    fn run<'a>(&'a mut self, terms: &Terms, slot_no: u16, proc_no: u32, args: Option<&'a [u8]>) -> IncomingCall<'a> {
        self.phase = Phase::Running;
        self.result.clear();
        IncomingCall {
            key: CallKey { token: terms.token, slot: slot_no, call_no: self.call_no },
            program: terms.program,
            version: terms.version,
            proc_no,
            client_order: terms.client_order,
            args: match args {
                Some(a) => a,
                None => self.rx.message(),
            },
            reply: &mut self.result,
        }
    }

    /// A client asking what became of the current call: the answer its phase gives.
    fn on_probe(
        &mut self,
        terms: &Terms,
        slot_no: u16,
        g: &mut Guard<'_>,
        stats: &mut ServerStats,
        out: &mut impl FnMut(&A, &[u8], &[u8]),
    ) {
        match self.phase {
            Phase::Running => {
                stats.working += 1;
                self.send_simple(g, Kind::Working, terms.token, slot_no, out)
            }
            Phase::Done(_) => {
                stats.duplicates += 1;
                self.send_result(g, terms, slot_no, out)
            }
            Phase::Receiving => self.send_frag_ack(g, terms.token, slot_no, out),
            Phase::Empty | Phase::Acked => {}
        }
    }

    /// The client's acknowledgement of the result's fragments: what it lacks goes again.
    fn on_frag_ack(
        &mut self,
        token: u64,
        h: &Header,
        body: &[u8],
        g: &mut Guard<'_>,
        out: &mut impl FnMut(&A, &[u8], &[u8]),
    ) {
        if let (Phase::Done(Status::Ok), Some(bits)) = (self.phase, body.get(..8)) {
            let bitmap = u64::from_le_bytes(bits.try_into().unwrap_or([0; 8]));
            let stalled = h.flags & flags::STALLED != 0;
            let mut pending = Burst::new();
            self.tx.on_ack(h.offset, bitmap, stalled, |i, r| pending.push(i, r));
            for (i, r) in pending.iter() {
                self.emit_result_frag(g, token, h.slot, i, r, out);
            }
        }
    }

    /// Gives back what a large result or reassembly held.
    fn release(&mut self) {
        if self.result.capacity() > KEEP_CAPACITY {
            self.result = Vec::new();
        }
        self.rx.shrink(KEEP_CAPACITY);
    }

    fn base_header(&self, kind: Kind, token: u64, slot_no: u16) -> Header {
        let mut h = Header::new(kind);
        h.token = token;
        h.slot = slot_no;
        h.call_no = self.call_no;
        h
    }

    fn send_simple(
        &self,
        g: &mut Guard<'_>,
        kind: Kind,
        token: u64,
        slot_no: u16,
        out: &mut impl FnMut(&A, &[u8], &[u8]),
    ) {
        if let Some(peer) = self.peer.as_ref() {
            g.emit(self.base_header(kind, token, slot_no), &[], &mut |hd, b| out(peer, hd, b));
        }
    }

    fn send_frag_ack(&self, g: &mut Guard<'_>, token: u64, slot_no: u16, out: &mut impl FnMut(&A, &[u8], &[u8])) {
        let Some(peer) = self.peer.as_ref() else { return };
        let (cum, bitmap) = self.rx.ack_state();
        let mut h = self.base_header(Kind::FragAck, token, slot_no);
        h.total_len = self.rx.total();
        h.offset = cum;
        g.emit(h, &bitmap.to_le_bytes(), &mut |hd, b| out(peer, hd, b));
    }

    fn emit_result_frag(
        &self,
        g: &mut Guard<'_>,
        token: u64,
        slot_no: u16,
        i: u32,
        req_ack: bool,
        out: &mut impl FnMut(&A, &[u8], &[u8]),
    ) {
        let Some(peer) = self.peer.as_ref() else { return };
        let r = self.tx.range(i);
        let mut h = self.base_header(Kind::Result, token, slot_no);
        h.total_len = self.result.len() as u32;
        h.offset = r.start as u32;
        h.flags = if req_ack { flags::REQ_ACK } else { 0 };
        g.emit(h, &self.result[r], &mut |hd, b| out(peer, hd, b));
    }

    /// Sends (or sends again from the start) the slot's finished result.
    fn send_result(&mut self, g: &mut Guard<'_>, terms: &Terms, slot_no: u16, out: &mut impl FnMut(&A, &[u8], &[u8])) {
        match self.phase {
            Phase::Done(Status::Error(code)) => {
                let Some(peer) = self.peer.as_ref() else { return };
                // The reason, as much of it as one frame carries.
                let message = ErrorMessage::fit(&self.result, terms.frag_size as usize);
                let mut h = self.base_header(Kind::Error, terms.token, slot_no);
                h.proc_or_code = code.to_u32();
                h.total_len = message.as_bytes().len() as u32;
                g.emit(h, message.as_bytes(), &mut |hd, b| out(peer, hd, b));
            }
            Phase::Done(Status::Ok) => {
                self.tx.reset(self.result.len() as u32, terms.frag_size, terms.window as u32);
                if let Some(req_ack) = self.tx.send_single() {
                    self.emit_result_frag(g, terms.token, slot_no, 0, req_ack, out);
                    return;
                }
                let mut pending = Burst::new();
                self.tx.send_new(|i, r| pending.push(i, r));
                for (i, r) in pending.iter() {
                    self.emit_result_frag(g, terms.token, slot_no, i, r, out);
                }
            }
            _ => {}
        }
    }
}
