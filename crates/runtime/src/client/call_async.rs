//! An async call over lowlat's protocol: the blocking call's steps (claim a slot, encode, send,
//! wait) as a future. It is sent at once when a slot is free (calls made one after another are
//! in flight together before any is awaited); each poll looks once for the reply and, finding
//! none, either asks to be polled again or parks in the reactor (`crate::reactor`) on the slot's
//! descriptor and its next timer (`super::pacing` says which).
//!
//! While in flight the slot is lent to the call (`SlotPool::lend`): its lock is free (a future may
//! move between threads, a lock guard may not), and every other caller passes it by. A dropped
//! call gives its slot back at once, its call abandoned ([`ClientSlot::abandon`]): a late reply
//! to it is stale to the next call, whose call number is new.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use lowlat_proto::Execution;
use lowlat_wait::{SpinPolicy, Spinner};

use super::call::{encode_args, sent_args, CallClock, SlotIo};
use super::lowlat::{Lowlat, Slot};
use super::pacing::{claim_or_park, Pacing, SlotWait, POLLS_PER_CLOCK};
use super::pool::{Claimed, InLine};
use crate::driver::SlotChannel;
use crate::reactor::{self, Parking};
use crate::waiting::{Stop, Waited};
use crate::{Error, OutBuf};

/// A call that keeps polling looks whether its peer is gone once in this many polls (a few
/// milliseconds over shared memory, where a look is a ring's header; as often as a blocking
/// wait that spins looks at the shared-memory liveness socket).
const PEER_CHECK_POLLS: u32 = 1 << 15;

/// One async call ([`Lowlat::call_async`]).
pub(crate) struct LowlatCall<'c, R, E, Enc, Dec> {
    client: &'c Lowlat,
    proc_no: u32,
    encode: Option<Enc>,
    decode: Option<Dec>,
    clock: CallClock,
    /// The slot lent to this call, once it has sent.
    slot: Option<usize>,
    /// Whether the slot's engine knows when the call began and when it fails.
    timed: bool,
    /// Whether the call was sent again after a rebind (once at most, as a blocking call).
    resent: bool,
    parking: Option<Parking>,
    /// Looks once per poll, never spins (`super::pacing`).
    look: Spinner,
    pacing: Pacing,
    /// Why the call failed as it was sent at once, told by the first poll (boxed: an error is
    /// rare, and the future is the smaller for it, by the size of an `Error`).
    failed: Option<Box<Error>>,
    /// Polls made (a whole wait every `POLLS_PER_CLOCK`).
    polls: u32,
    /// Its place in line while it waits for a slot.
    line: InLine,
    _result: PhantomData<fn() -> (R, E)>,
}

// Nothing in the call points into itself: it may move between polls.
impl<R, E, Enc, Dec> Unpin for LowlatCall<'_, R, E, Enc, Dec> {}

impl<R, E, Enc, Dec> LowlatCall<'_, R, E, Enc, Dec> {
    /// The decoder, if no reply used it (a client over several servers gives it to the call
    /// that replaces this one).
    pub(crate) fn take_decode(&mut self) -> Option<Dec> {
        self.decode.take()
    }
}

impl Lowlat {
    /// The call as a future, sent now if a slot is free (else once one is, when polled).
    pub(crate) fn call_async<R, E, Enc, Dec>(
        &self,
        proc_no: u32,
        timeout: Duration,
        encode: Enc,
        decode: Dec,
    ) -> LowlatCall<'_, R, E, Enc, Dec>
    where
        E: std::error::Error + Send + Sync + 'static,
        Enc: FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        Dec: FnOnce(&[u8]) -> Result<R, E>,
    {
        let mut call = LowlatCall {
            client: self,
            proc_no,
            encode: Some(encode),
            decode: Some(decode),
            clock: CallClock { begun: None, deadline: None, timeout },
            slot: None,
            timed: false,
            resent: false,
            parking: None,
            look: Spinner::new(SpinPolicy::Block),
            pacing: Pacing::default(),
            failed: None,
            polls: 0,
            line: InLine::default(),
            _result: PhantomData,
        };
        if let Some(g) = self.shared.slots.try_claim_now() {
            call.failed = call.begin(g).err().map(Box::new);
        }
        call
    }
}

impl<R, E, Enc, Dec> Future for LowlatCall<'_, R, E, Enc, Dec>
where
    E: std::error::Error + Send + Sync + 'static,
    Enc: FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
    Dec: FnOnce(&[u8]) -> Result<R, E>,
{
    type Output = Result<R, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if let Some(e) = this.failed.take() {
            return Poll::Ready(Err(*e));
        }
        // Whatever woke us, the earlier parking is over.
        let was_parked = this.parking.take().is_some();
        let c = this.client;
        let mut guard = match this.slot {
            Some(i) => {
                let mut g = c.shared.slots.hold(i);
                if was_parked {
                    c.shared.slots.unparked(i);
                    if let Err(e) = g.chan.as_mut().expect("lent with its channel").as_dyn().unpark(false) {
                        let e = c.lost(this.proc_no, Execution::Unknown, e);
                        return Poll::Ready(this.finish(g, Err(e)));
                    }
                }
                g
            }
            None => match this.start(cx) {
                Ok(Some(g)) => g,
                Ok(None) => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            },
        };
        // Woken with nothing to read: before parking again, look at whether the peer is gone.
        let mut check_peer = was_parked;
        loop {
            // Most polls of a call in flight find nothing: a bare look, and the whole wait
            // (which reads the clock for the call's deadline and its engine's timers) one poll
            // in POLLS_PER_CLOCK, when a frame came, or before parking.
            this.polls = this.polls.wrapping_add(1);
            let whole = check_peer || this.polls.is_multiple_of(POLLS_PER_CLOCK);
            let waited = this.wait(&mut guard, whole);
            match waited {
                Waited::Done(Err(e @ Error::SessionLost { execution: Execution::NotSent, .. })) if !this.resent => {
                    // The server (same incarnation) never saw this session: bind again and send
                    // once more, as a blocking call does; it cannot run twice.
                    this.resent = true;
                    if let Err(e) = this.resend(&mut guard, e) {
                        return Poll::Ready(this.finish(guard, Err(e)));
                    }
                }
                Waited::Done(r) => {
                    let i = guard.index();
                    let r = this.finish(guard, r);
                    c.shared.slots.wake_parked(i, |s| s.chan.as_mut().is_some_and(|ch| ch.as_dyn().ready()));
                    return Poll::Ready(r);
                }
                Waited::Park(_) if this.pacing.keep_polling(c.shared.slots.returned(), &guard.spinner) => {
                    // A call that polls on (one spinning for ever does so to its deadline) looks
                    // now and then whether its peer is gone, as a parked one does when woken.
                    if this.polls.is_multiple_of(PEER_CHECK_POLLS) {
                        if let Err(e) = guard.chan.as_mut().expect("lent with its channel").as_dyn().unpark(true) {
                            let e = c.lost(this.proc_no, Execution::Unknown, e);
                            return Poll::Ready(this.finish(guard, Err(e)));
                        }
                    }
                    // Polled again once the executor has run its other tasks.
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                // Parks only after a whole wait, which knows the engine's next timer.
                Waited::Park(_) if !whole => this.polls = POLLS_PER_CLOCK - 1,
                Waited::Park(timeout) => {
                    let chan = guard.chan.as_mut().expect("lent with its channel").as_dyn();
                    match reactor::park_on(chan, timeout, std::mem::take(&mut check_peer), cx.waker()) {
                        Ok(None) => continue,
                        Ok(Some(p)) => {
                            this.parking = Some(p);
                            c.shared.slots.parked(guard.index(), cx.waker());
                            return Poll::Pending;
                        }
                        Err(e) => {
                            let e = c.lost(this.proc_no, Execution::Unknown, e);
                            return Poll::Ready(this.finish(guard, Err(e)));
                        }
                    }
                }
            }
        }
    }
}

impl<'c, R, E, Enc, Dec> LowlatCall<'c, R, E, Enc, Dec>
where
    E: std::error::Error + Send + Sync + 'static,
    Enc: FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
    Dec: FnOnce(&[u8]) -> Result<R, E>,
{
    /// Claims a slot, encodes and sends; `None`: every slot is busy (parked until one is
    /// released, or the deadline).
    fn start(&mut self, cx: &mut Context<'_>) -> Result<Option<Claimed<'c, Slot>>, Error> {
        let Some(g) = self.claim(cx)? else { return Ok(None) };
        self.begin(g).map(Some)
    }

    /// Encodes and sends the call in the slot `g` holds, and lends it the slot. Over shared
    /// memory the arguments are written where the server reads them, and the call goes as it
    /// is encoded, as a blocking call's does (`encode_args`).
    fn begin(&mut self, mut g: Claimed<'c, Slot>) -> Result<Claimed<'c, Slot>, Error> {
        let c = self.client;
        let proc_no = self.proc_no;
        let encode = self.encode.take().expect("encoded once");
        c.prepare(&mut g)?;
        let sent = encode_args(&mut g, proc_no, encode, None)
            .map_err(|e| Error::Encode { call: c.site(proc_no), source: Box::new(e) })?;
        c.shared.slots.lend(&g);
        self.slot = Some(g.index());
        if let Err(e) = self.send(&mut g, sent) {
            self.release(g, Some(&e));
            return Err(e);
        }
        Ok(g)
    }

    /// A free slot, or `None` with the call parked until one is released.
    fn claim(&mut self, cx: &mut Context<'_>) -> Result<Option<Claimed<'c, Slot>>, Error> {
        let c = self.client;
        match claim_or_park(&c.shared.slots, cx.waker(), &mut self.line, self.clock.fix().1)? {
            SlotWait::Claimed(g) => Ok(Some(g)),
            SlotWait::Parked(p) => {
                self.parking = Some(p);
                Ok(None)
            }
            SlotWait::TimedOut => Err(c.no_slot(self.proc_no, self.clock.timeout)),
        }
    }

    /// Sends the call whose arguments are in the slot's engine, unless `sent` says it went as
    /// it was encoded.
    fn send(&mut self, g: &mut Slot, sent: bool) -> Result<(), Error> {
        let c = self.client;
        let Slot { engine, chan, .. } = g;
        let engine = engine.as_mut().expect("prepared");
        match chan.as_mut().expect("prepared") {
            SlotChannel::Shm(ch) => {
                c.send_call(&mut **ch, engine, self.proc_no, sent, &mut self.clock, &mut self.timed)
            }
            SlotChannel::Other(ch) => {
                c.send_call(&mut **ch, engine, self.proc_no, sent, &mut self.clock, &mut self.timed)
            }
        }
    }

    /// Looks once for the outcome, [`Waited::Park`] when none came; unless `whole`, a miss is
    /// a bare look at the channel (no clock, no timer: its `Park` carries nothing).
    fn wait(&mut self, g: &mut Slot, whole: bool) -> Waited<R> {
        let c = self.client;
        let Slot { engine, chan, buf, outbox, .. } = g;
        let io = SlotIo { engine: engine.as_mut().expect("prepared"), buf, outbox, spinner: &mut self.look };
        let (proc_no, clock, timed, decode) = (self.proc_no, &mut self.clock, &mut self.timed, &mut self.decode);
        match chan.as_mut().expect("prepared") {
            SlotChannel::Shm(ch) => {
                let pending = match bare_look(&mut **ch, io.buf, whole) {
                    Ok(pending) => pending,
                    Err(missed) => return missed,
                };
                c.await_outcome(&mut **ch, io, proc_no, pending, clock, timed, decode, None, |_, t| Err(Stop::Park(t)))
            }
            SlotChannel::Other(ch) => {
                let pending = match bare_look(&mut **ch, io.buf, whole) {
                    Ok(pending) => pending,
                    Err(missed) => return missed,
                };
                c.await_outcome(&mut **ch, io, proc_no, pending, clock, timed, decode, None, |_, t| Err(Stop::Park(t)))
            }
        }
    }

    /// Binds again and sends the call once more (the server never saw the session, and
    /// `refused` said so): with the arguments it was sent with, read back before anything else
    /// is sent (from the engine, or from the call ring they were written into). Where they
    /// cannot be, the call is not sent again, and fails as it was refused (it did not run).
    #[cold]
    fn resend(&mut self, g: &mut Slot, refused: Error) -> Result<(), Error> {
        let c = self.client;
        let Some(args) = sent_args(g) else { return Err(refused) };
        c.invalidate(g, false);
        c.prepare(g)?;
        g.engine.as_mut().expect("prepared").args_buf().extend_from_slice(&args);
        self.clock.begun = None; // the same deadline, but a fresh start for the new round trip
        self.timed = false;
        self.send(g, false)
    }

    /// Gives the slot back, after mending it as a failed blocking call does.
    fn finish(&mut self, g: Claimed<'c, Slot>, r: Result<R, Error>) -> Result<R, Error> {
        self.release(g, r.as_ref().err());
        r
    }

    fn release(&mut self, mut g: Claimed<'c, Slot>, failure: Option<&Error>) {
        let c = self.client;
        if let Some(e) = failure {
            c.recover(&mut g, e);
        }
        if c.shared.cfg.spans {
            super::call::record_span_ids(&g);
        }
        self.slot = None;
        c.shared.slots.give_back(g);
    }
}

/// Unless `whole`, a look at `chan` alone: the frame's length when one came, `Err(Park)` when
/// none did (an error is left for the whole wait to meet and report).
#[inline]
fn bare_look<C: crate::driver::ClientChannel + ?Sized, R>(
    chan: &mut C,
    buf: &mut Vec<u8>,
    whole: bool,
) -> Result<Option<usize>, Waited<R>> {
    if whole {
        return Ok(None);
    }
    match chan.try_recv(buf) {
        Ok(Some(n)) => Ok(Some(n)),
        Ok(None) => Err(Waited::Park(None)),
        Err(_) => Ok(None),
    }
}

impl<R, E, Enc, Dec> Drop for LowlatCall<'_, R, E, Enc, Dec> {
    fn drop(&mut self) {
        self.parking = None;
        self.client.shared.slots.leave_line(&mut self.line);
        let Some(i) = self.slot.take() else { return };
        self.client.shared.slots.unparked(i);
        // Dropped with its call in flight: the slot is free for the next call, which makes
        // anything still coming for this one stale.
        let c = self.client;
        let mut g = c.shared.slots.hold(i);
        if let Some(engine) = g.engine.as_mut() {
            engine.abandon();
        }
        if let Some(chan) = g.chan.as_mut() {
            let _ = chan.as_dyn().unpark(false);
        }
        c.shared.slots.give_back(g);
    }
}
