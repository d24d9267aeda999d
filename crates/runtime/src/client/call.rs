//! The call path of lowlat's protocol: claim a slot, encode the arguments where they will be
//! sent from, send, wait (spin, then block or park), decode the result where it lies, give the
//! slot back. The common case (a whole result in one frame) is recognised by its header and
//! decoded at once; everything else goes through the slot engine's state machine.

use std::time::{Duration, Instant};

use lowlat_codec::OutBuf;
use lowlat_proto::wire::{Header, Kind as HeaderKind};
use lowlat_proto::{ClientSlot, Execution, Outcome, HEADER_LEN};
use lowlat_wait::Spinner;

use super::lowlat::{Lowlat, Slot};
use crate::driver::{ClientChannel, SlotChannel};
use crate::trace::{self, ClientTrace};
use crate::waiting::{Stop, Waited};
use crate::Error;

/// What [`Lowlat::await_placed`] found.
pub(super) enum Placed<R> {
    /// The whole result, decoded (or the decoder's error).
    Done(Result<R, Error>),
    /// A frame of `len` bytes that is not a whole result, received and not yet handled.
    Frame(usize),
    /// Nothing within the clock-free polls, or a broken channel.
    NotYet,
}

/// Moments of a traced call, filled in as it goes.
#[derive(Default)]
pub(super) struct Marks {
    begin: u64,
    encoded: u64,
    sent: u64,
    received: u64,
}

/// A slot's engine, buffers and waiting state, lent to one exchange.
pub(super) struct SlotIo<'a> {
    pub engine: &'a mut ClientSlot,
    pub buf: &'a mut Vec<u8>,
    pub outbox: &'a mut Vec<u8>,
    pub spinner: &'a mut Spinner,
}

/// When a call began and when it fails, read from the clock only once needed.
pub(super) struct CallClock {
    pub begun: Option<Instant>,
    pub deadline: Option<Instant>,
    pub timeout: Duration,
}

impl CallClock {
    /// The call's start and deadline, reading the clock if they are not known yet.
    pub fn fix(&mut self) -> (Instant, Instant) {
        let begun = *self.begun.get_or_insert_with(Instant::now);
        (begun, *self.deadline.get_or_insert(begun + self.timeout))
    }

    /// Tells `engine` when its call began and when it fails, unless `timed` says it knows.
    pub fn time_once(&mut self, timed: &mut bool, engine: &mut ClientSlot) {
        if !std::mem::replace(timed, true) {
            let (now, deadline) = self.fix();
            engine.time_call(now, deadline);
        }
    }
}

impl Lowlat {
    /// One call that fails with [`Error::Timeout`] unless it completes within `timeout`.
    /// `encode` appends the arguments to an empty buffer (over shared memory the call ring's
    /// free space, so they are written once; elsewhere a buffer preallocated per slot);
    /// `decode` reads the result where it lies.
    pub fn call_timeout<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        proc_no: u32,
        timeout: Duration,
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        let trace = self.shared.cfg.trace;
        // In a span (`Client` entered it), whose ids are recorded as the call ends.
        let spans = self.shared.cfg.spans;
        let mut marks = Marks { begin: if trace { trace::now_ns() } else { 0 }, ..Marks::default() };
        let mut clock = CallClock { begun: None, deadline: None, timeout };
        let Some(mut guard) = self.shared.slots.claim(|| clock.fix().1) else {
            return Err(self.no_slot(proc_no, Duration::ZERO));
        };
        self.prepare(&mut guard)?;
        let sent = encode_args(&mut guard, proc_no, encode, trace.then_some(&mut marks.encoded))
            .map_err(|e| Error::Encode { call: self.site(proc_no), source: Box::new(e) })?;
        let mut decode = Some(decode);
        let placed =
            if sent && !trace && !spans { self.await_placed(&mut guard, proc_no, &mut decode) } else { Placed::NotYet };
        let r = match placed {
            // Returned at once, so that the `Ok` is written once, where the caller reads it: kept
            // in `r` (88 bytes), it was copied by wide loads right after the few bytes written
            // for it, loads that wait for those stores to reach the cache. With the result's
            // header compared a word at a time (`Header::matches`), 24 ns off a shared-memory
            // null call where the two CPUs are close (mean 168 -> 142 ns). Not traced
            // (`await_placed` ran), and nothing to recover from.
            Placed::Done(Ok(v)) => {
                drop(guard);
                return Ok(v);
            }
            Placed::Done(r) => r,
            waiting => {
                let pending = if let Placed::Frame(n) = waiting { Some(n) } else { None };
                let marks = trace.then_some(&mut marks);
                match self.run(&mut guard, proc_no, sent, pending, &mut clock, &mut decode, marks) {
                    Err(e @ Error::SessionLost { execution: Execution::NotSent, .. }) => {
                        self.rebind_and_rerun(&mut guard, proc_no, &mut clock, &mut decode, e)
                    }
                    r => r,
                }
            }
        };
        if let Err(e) = &r {
            self.recover(&mut guard, e);
        }
        if spans {
            record_span_ids(&guard);
        }
        if trace && r.is_ok() {
            let e = guard.engine.as_ref().expect("prepared");
            trace::set_client_trace(ClientTrace {
                token: e.session().token,
                slot: e.slot(),
                call_no: e.call_no(),
                begin: marks.begin,
                encoded: marks.encoded,
                sent: marks.sent,
                received: marks.received,
                end: trace::now_ns(),
            });
        }
        drop(guard);
        r
    }

    /// The server (same incarnation) never saw this session (`refused`): binds again and sends
    /// the call once more; it cannot run twice. Off the fast path, hence out of line.
    #[cold]
    #[inline(never)]
    pub(super) fn rebind_and_rerun<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        slot: &mut Slot,
        proc_no: u32,
        clock: &mut CallClock,
        decode: &mut Option<impl FnOnce(&[u8]) -> Result<R, E>>,
        refused: Error,
    ) -> Result<R, Error> {
        // Taken before anything else is sent: arguments written into a call ring are read back
        // from there. Where they cannot be, the call is not sent again (it did not run).
        let Some(args) = sent_args(slot) else {
            return Err(refused);
        };
        self.invalidate(slot, false);
        self.prepare(slot)?;
        slot.engine.as_mut().expect("prepared").args_buf().extend_from_slice(&args);
        clock.begun = None; // the same deadline, but a fresh start for the new round trip
        self.run(slot, proc_no, false, None, clock, decode, None)
    }

    /// A call written in place into a shared-memory call ring (`encode_args` sent it) is nearly
    /// always answered, within the spinner's clock-free polls, by a whole result in the result
    /// ring: waited for here, on the ring itself, with none of [`run`](Self::run)'s general
    /// machinery (engine state machine, clock, outbox, errors carried through its layers): ~140
    /// instructions and ~10 ns less per null call where the two CPUs are far apart. Anything else
    /// is left to `run`: no answer yet (its wait then starts with clock-free polls of its own), a
    /// frame of another kind (received: `Frame`, handled there first), a broken ring (met again
    /// there).
    #[inline(always)]
    pub(super) fn await_placed<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        slot: &mut Slot,
        proc_no: u32,
        decode: &mut Option<impl FnOnce(&[u8]) -> Result<R, E>>,
    ) -> Placed<R> {
        let Slot { engine: Some(engine), chan: Some(SlotChannel::Shm(chan)), buf, spinner, .. } = slot else {
            return Placed::NotYet;
        };
        let mut polls = spinner.clock_free_polls();
        loop {
            crate::marks::collect(false);
            match chan.try_recv(buf) {
                Ok(Some(n)) => {
                    let Some(r) = self.decode_whole(engine, chan.received(buf, n), proc_no, decode) else {
                        return Placed::Frame(n);
                    };
                    // As the spinner records an answer within its clock-free polls.
                    spinner.observe(Duration::ZERO);
                    return Placed::Done(r);
                }
                Ok(None) if polls > 0 => {
                    polls -= 1;
                    std::hint::spin_loop();
                }
                Ok(None) | Err(_) => return Placed::NotYet,
            }
        }
    }

    /// The call's outcome if `frame` is its whole result, recognised by its header alone (the
    /// engine declines on any other session or frame): its body decoded where it lies.
    #[inline(always)]
    pub(super) fn decode_whole<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        engine: &mut ClientSlot,
        frame: &[u8],
        proc_no: u32,
        decode: &mut Option<impl FnOnce(&[u8]) -> Result<R, E>>,
    ) -> Option<Result<R, Error>> {
        let body = engine.take_whole_result(frame)?;
        let decode = decode.take().expect("one reply per call");
        Some(decode(body).map_err(|e| self.decode_error(proc_no, e)))
    }

    /// Sends the call, unless `sent` says it went as it was encoded, and waits for its outcome;
    /// `pending`: a frame already received for it (by [`await_placed`](Self::await_placed)),
    /// handled before anything else.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        slot: &mut Slot,
        proc_no: u32,
        sent: bool,
        pending: Option<usize>,
        clock: &mut CallClock,
        decode: &mut Option<impl FnOnce(&[u8]) -> Result<R, E>>,
        marks: Option<&mut Marks>,
    ) -> Result<R, Error> {
        let Slot { engine, chan, buf, outbox, spinner, .. } = slot;
        let io = SlotIo { engine: engine.as_mut().expect("prepared"), buf, outbox, spinner };
        match chan.as_mut().expect("prepared") {
            SlotChannel::Shm(c) => self.exchange(&mut **c, io, proc_no, sent, pending, clock, decode, marks),
            SlotChannel::Other(c) => self.exchange(&mut **c, io, proc_no, sent, pending, clock, decode, marks),
        }
    }

    /// [`run`](Self::run) for one kind of channel.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn exchange<R, E: std::error::Error + Send + Sync + 'static, C: ClientChannel + ?Sized>(
        &self,
        chan: &mut C,
        io: SlotIo<'_>,
        proc_no: u32,
        sent: bool,
        pending: Option<usize>,
        clock: &mut CallClock,
        decode: &mut Option<impl FnOnce(&[u8]) -> Result<R, E>>,
        mut marks: Option<&mut Marks>,
    ) -> Result<R, Error> {
        // Whether the engine knows when the call began and when it fails.
        let mut timed = false;
        self.send_call(chan, io.engine, proc_no, sent, clock, &mut timed)?;
        if let Some(m) = marks.as_deref_mut() {
            m.sent = trace::now_ns();
        }
        let block = |c: &mut C, t: Option<Duration>| c.block(t).map_err(Stop::Io);
        match self.await_outcome(chan, io, proc_no, pending, clock, &mut timed, decode, marks, block) {
            Waited::Done(r) => r,
            Waited::Park(_) => unreachable!("a wait whose block never parks returned to park"),
        }
    }

    /// Sends the call whose arguments are in `engine`'s buffer, unless `sent` says it went as it
    /// was encoded (written in place in a shared-memory call ring).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn send_call<C: ClientChannel + ?Sized>(
        &self,
        chan: &mut C,
        engine: &mut ClientSlot,
        proc_no: u32,
        sent: bool,
        clock: &mut CallClock,
        timed: &mut bool,
    ) -> Result<(), Error> {
        let mut send_err: Option<std::io::Error> = None;
        // Over a reliable channel nothing is retransmitted and the clock serves only the
        // deadline, so it is read after the call is sent, and only once the reply has not come
        // within the spinner's clock-free polls: a read costs ~30 ns in a VM, and on shared
        // memory the reply often comes sooner. Elsewhere the start must precede the send, as it
        // times the round trip for retransmission.
        let reliable = chan.reliable();
        if !reliable {
            clock.fix();
        }
        if !sent {
            engine
                .send_call(proc_no, &mut |h: &[u8], b: &[u8]| {
                    if let Err(e) = chan.send(h, b) {
                        send_err.get_or_insert(e);
                    }
                })
                .map_err(|e| self.call_error(proc_no, e))?;
        }
        if !reliable {
            clock.time_once(timed, engine);
        }
        match send_err {
            Some(e) => Err(self.lost(proc_no, Execution::Unknown, e)),
            None => Ok(()),
        }
    }

    /// Waits for the outcome of the call sent: spins, then `block`s (a blocking call sleeps in
    /// it; an async one returns [`Stop::Park`] from it, and this returns [`Waited::Park`]).
    /// `pending`: the length of a frame already received, handled first.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn await_outcome<R, E: std::error::Error + Send + Sync + 'static, C: ClientChannel + ?Sized>(
        &self,
        chan: &mut C,
        io: SlotIo<'_>,
        proc_no: u32,
        mut pending: Option<usize>,
        clock: &mut CallClock,
        timed: &mut bool,
        decode: &mut Option<impl FnOnce(&[u8]) -> Result<R, E>>,
        mut marks: Option<&mut Marks>,
        mut block: impl FnMut(&mut C, Option<Duration>) -> Result<(), Stop>,
    ) -> Waited<R> {
        let SlotIo { engine, buf, outbox, spinner } = io;
        let mut send_err: Option<std::io::Error> = None;
        loop {
            let deadline = || {
                clock.time_once(timed, engine);
                engine.poll_timeout()
            };
            let got = match pending.take() {
                Some(n) => Ok(Some(n)),
                None => {
                    let look = |c: &mut C| {
                        crate::marks::collect(false);
                        c.try_recv(buf).map_err(Stop::Io)
                    };
                    spinner.wait_on_lazy(deadline, &mut *chan, look, &mut block)
                }
            };
            if let (Some(m), Ok(Some(_))) = (marks.as_deref_mut(), &got) {
                m.received = trace::now_ns();
            }
            match got {
                Ok(Some(n)) => {
                    // Nearly every reply over a reliable channel.
                    if let Some(r) = self.decode_whole(engine, chan.received(buf, n), proc_no, decode) {
                        return Waited::Done(r);
                    }
                    // The frame may lie in the transport's own memory (a shared-memory ring), so
                    // what the engine sends in answer waits in the outbox until it is read.
                    outbox.clear();
                    let mut out = |h: &[u8], b: &[u8]| queue_frame(outbox, h, b);
                    // The engine asks for the arrival time only to time retransmissions.
                    let arrived = || spinner.ready_at().unwrap_or_else(Instant::now);
                    let outcome = match engine.handle(chan.received(buf, n), arrived, &mut out) {
                        Some(Outcome::Reply(body)) => {
                            let decode = decode.take().expect("one reply per call");
                            Some(decode(body).map_err(|e| self.decode_error(proc_no, e)))
                        }
                        Some(Outcome::Failed(e)) => Some(Err(self.call_error(proc_no, e))),
                        Some(Outcome::Remote { code, message }) => Some(Err(self.remote_error(proc_no, code, message))),
                        None => None,
                    };
                    if !outbox.is_empty() {
                        send_outbox(chan, outbox, &mut send_err);
                    }
                    if let Some(r) = outcome {
                        return Waited::Done(r);
                    }
                }
                Ok(None) => {
                    let mut out = |h: &[u8], b: &[u8]| {
                        if let Err(e) = chan.send(h, b) {
                            send_err.get_or_insert(e);
                        }
                    };
                    if let Some(e) = engine.handle_timeout(Instant::now(), &mut out) {
                        return Waited::Done(Err(self.call_error(proc_no, e)));
                    }
                }
                Err(Stop::Io(e)) => return Waited::Done(Err(self.lost(proc_no, Execution::Unknown, e))),
                Err(Stop::Park(t)) => return Waited::Park(t),
            }
            if let Some(e) = send_err.take() {
                if chan.reliable() {
                    return Waited::Done(Err(self.lost(proc_no, Execution::Unknown, e)));
                }
            }
        }
    }
}

/// Encodes a call's arguments: over shared memory straight into the call ring, after room for
/// the header, and the call is then sent from there (`Ok(true)`) if it goes as one record (as a
/// server's procedure writes its result into the result ring); otherwise, or when the ring's
/// free space is too small (the encoder spills), into the slot engine's buffer, for
/// [`Lowlat::run`] to send (`Ok(false)`). `encoded`, when tracing: set to the moment the
/// arguments were encoded, before the call is published (so it precedes the server's receipt).
#[inline]
pub(super) fn encode_args<E>(
    slot: &mut Slot,
    proc_no: u32,
    encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
    mut encoded: Option<&mut u64>,
) -> Result<bool, E> {
    let mut mark = || {
        if let Some(at) = encoded.as_deref_mut() {
            *at = trace::now_ns();
        }
    };
    let engine = slot.engine.as_mut().expect("prepared");
    let Some(SlotChannel::Shm(chan)) = slot.chan.as_mut() else {
        encode(&mut OutBuf::from(engine.args_buf()))?;
        mark();
        return Ok(false);
    };
    let mut encode = Some(encode);
    let mut failed = None;
    let built = chan.send_in_place(|record| {
        let encode = encode.take()?;
        let (head, body) = record.split_at_mut(HEADER_LEN.min(record.len()));
        let mut args = OutBuf::in_region(body, engine.args_buf());
        if let Err(e) = encode(&mut args) {
            failed = Some(e);
            return None;
        }
        mark();
        // Spilled into the engine's buffer: sent from there.
        let len = args.placed()?;
        // No room for the header (a full ring lends nothing), or a call that cannot go as one
        // record: the engine has begun nothing, and the arguments go to its buffer.
        let head: Option<&mut [u8; HEADER_LEN]> = head.try_into().ok();
        if head.is_some_and(|head| engine.place_call(proc_no, len, head)) {
            Some(HEADER_LEN + len)
        } else {
            engine.args_buf().extend_from_slice(&body[..len]);
            None
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    // Not lent at all (a broken channel, reported when the call is sent): encoded as elsewhere.
    if let Some(encode) = encode {
        encode(&mut OutBuf::from(engine.args_buf()))?;
        mark();
    }
    Ok(matches!(built, Ok(Some(_))))
}

/// The arguments of the call `slot` just sent, to send it again: kept by its engine or, written
/// into a shared-memory call ring, read back from there (nothing has been sent since: it is the
/// ring's last record, and its header names this call).
pub(super) fn sent_args(slot: &Slot) -> Option<Vec<u8>> {
    let engine = slot.engine.as_ref()?;
    if let Some(args) = engine.args() {
        return Some(args.to_vec());
    }
    let Some(SlotChannel::Shm(chan)) = slot.chan.as_ref() else {
        return None;
    };
    let (h, args) = Header::parse(chan.last_sent()?).ok()?;
    let ours = h.kind == HeaderKind::Call && h.call_no == engine.call_no() && h.slot == engine.slot();
    ours.then(|| args.to_vec())
}

/// Records the session, slot and call number of the call `slot` made in the current span (the
/// call's, with [`ClientConfig::spans`](crate::ClientConfig::spans)).
pub(super) fn record_span_ids(slot: &Slot) {
    if let Some(e) = slot.engine.as_ref() {
        crate::spans::record_client_ids(e.session().token, e.slot(), e.call_no());
    }
}

/// Queues a frame in `outbox` after its length, for [`send_outbox`].
fn queue_frame(outbox: &mut Vec<u8>, head: &[u8], body: &[u8]) {
    outbox.extend_from_slice(&((head.len() + body.len()) as u32).to_ne_bytes());
    outbox.extend_from_slice(head);
    outbox.extend_from_slice(body);
}

/// Sends the frames queued in `outbox` (each after its length), keeping the first failure.
fn send_outbox<C: ClientChannel + ?Sized>(chan: &mut C, outbox: &[u8], send_err: &mut Option<std::io::Error>) {
    let mut rest = outbox;
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let (frame, next) = tail.split_at(u32::from_ne_bytes(*len) as usize);
        if let Err(e) = chan.send(&frame[..HEADER_LEN], &frame[HEADER_LEN..]) {
            send_err.get_or_insert(e);
        }
        rest = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver;

    /// Records what is sent; fails every send after the first `ok` ones.
    struct Recording {
        sent: Vec<(Vec<u8>, Vec<u8>)>,
        ok: usize,
        attempts: usize,
    }

    impl ClientChannel for Recording {
        fn send(&mut self, head: &[u8], body: &[u8]) -> std::io::Result<()> {
            self.attempts += 1;
            if self.sent.len() == self.ok {
                return Err(std::io::Error::other(format!("send {} refused", self.attempts)));
            }
            self.sent.push((head.to_vec(), body.to_vec()));
            Ok(())
        }
        fn try_recv(&mut self, _: &mut Vec<u8>) -> std::io::Result<Option<usize>> {
            Ok(None)
        }
        fn block(&mut self, _: Option<Duration>) -> std::io::Result<()> {
            Ok(())
        }
        fn park(&mut self) -> std::io::Result<driver::WakeOn> {
            Ok(driver::WakeOn::Now)
        }
        fn max_frame(&self) -> usize {
            1500
        }
        fn reliable(&self) -> bool {
            false
        }
    }

    #[test]
    fn frames_queued_while_reading_go_out_whole_and_in_order() {
        let (h1, h2) = ([1u8; HEADER_LEN], [2u8; HEADER_LEN]);
        let mut outbox = Vec::new();
        queue_frame(&mut outbox, &h1, b"first body");
        queue_frame(&mut outbox, &h2, b"");
        queue_frame(&mut outbox, &h1, &[9u8; 1000]);

        let mut chan = Recording { sent: Vec::new(), ok: usize::MAX, attempts: 0 };
        let mut err = None;
        send_outbox(&mut chan, &outbox, &mut err);
        assert!(err.is_none());
        let want: Vec<(Vec<u8>, Vec<u8>)> =
            vec![(h1.to_vec(), b"first body".to_vec()), (h2.to_vec(), Vec::new()), (h1.to_vec(), vec![9u8; 1000])];
        assert_eq!(chan.sent, want);

        // A failed send is reported, the first failure kept, and the frames after it are still
        // tried.
        let mut chan = Recording { sent: Vec::new(), ok: 1, attempts: 0 };
        send_outbox(&mut chan, &outbox, &mut err);
        assert_eq!((chan.sent.len(), chan.attempts), (1, 3));
        assert_eq!(err.map(|e| e.to_string()).as_deref(), Some("send 2 refused"));
        let mut err = None;
        send_outbox(&mut chan, &[], &mut err);
        assert!(err.is_none() && chan.sent.len() == 1, "an empty outbox sends nothing");

        // A keyed session's header comes with its tag: the frame goes whole (split after the
        // header, as every frame is).
        let tagged = [7u8; HEADER_LEN + lowlat_proto::TAG_LEN];
        let mut outbox = Vec::new();
        queue_frame(&mut outbox, &tagged, b"body");
        queue_frame(&mut outbox, &h2, b"next");
        let mut chan = Recording { sent: Vec::new(), ok: usize::MAX, attempts: 0 };
        send_outbox(&mut chan, &outbox, &mut err);
        let tag_and_body = [&[7u8; lowlat_proto::TAG_LEN][..], b"body"].concat();
        assert_eq!(chan.sent, vec![(vec![7u8; HEADER_LEN], tag_and_body), (h2.to_vec(), b"next".to_vec())]);
    }
}
