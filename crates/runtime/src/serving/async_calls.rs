//! Async procedures on a serving thread: a call's future is polled where the call arrived; one
//! that is pending is set aside here, and the thread serves other calls until the future's waker
//! fires. The waker notes which call woke and rings the endpoint's doorbell (as a worker's
//! completion does), and the serving thread polls the woken futures when it answers the doorbell.
//! A finished future's result goes out through the endpoint's [`Completions`], as a worker's
//! does, so a graceful stop counts a pending call as one in progress.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use lowlat_proto::Status;

use super::dispatch;
use super::workers::ReplyTo;
use crate::doorbell::EndpointShared;
use crate::program::ProcFuture;

/// The pending calls of one endpoint.
pub(crate) struct AsyncCalls {
    /// By index: the future and where its result goes. A free index is `None`.
    calls: Vec<Option<(ProcFuture, ReplyTo)>>,
    free: Vec<usize>,
    /// Each index's waker, made once: a waker left with a finished call's future can only make
    /// a later call at its index be polled once more than needed.
    wakers: Vec<Waker>,
    woken: Arc<Woken>,
    /// The indexes taken from `woken` (kept, so taking allocates nothing once warm).
    taken: Vec<usize>,
}

/// The calls whose wakers fired since the serving thread last looked.
struct Woken {
    ids: Mutex<Vec<usize>>,
    shared: Arc<EndpointShared>,
}

struct CallWaker {
    id: usize,
    woken: Arc<Woken>,
}

impl Wake for CallWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.ids.lock().unwrap_or_else(|p| p.into_inner()).push(self.id);
        self.woken.shared.doorbell.ring();
    }
}

impl AsyncCalls {
    pub fn new(shared: Arc<EndpointShared>) -> AsyncCalls {
        AsyncCalls {
            calls: Vec::new(),
            free: Vec::new(),
            wakers: Vec::new(),
            woken: Arc::new(Woken { ids: Mutex::new(Vec::new()), shared }),
            taken: Vec::new(),
        }
    }

    /// Polls a call's `future` once: its outcome if it is ready now, else `None`, the future set
    /// aside with the place its result goes (`reply_to`, made only then).
    pub fn start(&mut self, mut future: ProcFuture, reply_to: impl FnOnce() -> ReplyTo) -> Option<(Status, Vec<u8>)> {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                let id = self.calls.len();
                self.calls.push(None);
                self.wakers.push(Waker::from(Arc::new(CallWaker { id, woken: self.woken.clone() })));
                id
            }
        };
        match poll(&mut future, &self.wakers[id]) {
            Some(outcome) => {
                self.free.push(id);
                Some(outcome)
            }
            None => {
                self.calls[id] = Some((future, reply_to()));
                None
            }
        }
    }

    /// Polls the futures whose wakers fired; each that finishes sends its result on.
    pub fn poll_woken(&mut self) {
        std::mem::swap(&mut self.taken, &mut self.woken.ids.lock().unwrap_or_else(|p| p.into_inner()));
        for id in self.taken.drain(..) {
            let Some((future, _)) = self.calls[id].as_mut() else { continue };
            if let Some((status, result)) = poll(future, &self.wakers[id]) {
                let (_, reply_to) = self.calls[id].take().expect("polled above");
                self.free.push(id);
                reply_to(status, &result);
            }
        }
    }

    /// Drops every pending future, its call answered by the caller (a stop's time ran out).
    pub fn drop_all(&mut self) {
        for (id, call) in self.calls.iter_mut().enumerate() {
            if call.take().is_some() {
                self.free.push(id);
            }
        }
    }
}

/// One poll, a panic taken as the procedure's failure.
fn poll(future: &mut ProcFuture, waker: &Waker) -> Option<(Status, Vec<u8>)> {
    let mut cx = Context::from_waker(waker);
    match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx))) {
        Ok(Poll::Pending) => None,
        Ok(Poll::Ready(r)) => Some(dispatch::async_outcome(Ok(r))),
        Err(panic) => Some(dispatch::async_outcome(Err(panic))),
    }
}
