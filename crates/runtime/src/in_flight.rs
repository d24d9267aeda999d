//! Many calls in flight from blocking code, with no executor: make them as async calls (each is
//! sent as it is made, `Client::call_async` and the generated `*_async` methods), then collect
//! them here on the calling thread ([`wait_all`], or [`InFlight`] to keep a window of calls
//! going). The thread polls only the calls that were woken, takes every completed one in one
//! pass, and sleeps when every call has parked in the reactor.
//!
//! A place's waker is made once, with the set: keeping W calls in flight allocates nothing per
//! call.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// A set of calls in flight, polled on the thread that made it (it is not `Send`: its wakers
/// wake that thread).
///
/// ```no_run
/// # fn demo(client: &lowlat::Client) -> Result<(), lowlat::Error> {
/// let mut calls = lowlat::InFlight::new(64);
/// for n in 0..64u32 {
///     // Sent now: all 64 are in flight before the first result is looked at.
///     let encode = move |out: &mut lowlat::OutBuf<'_>| {
///         out.extend_from_slice(&n.to_le_bytes());
///         Ok::<_, lowlat::DecodeError>(())
///     };
///     // Made where it stays in the set (`push` takes a call made already).
///     calls.push_with(|| client.call_async(1, encode, |result: &[u8]| Ok(result.len()))).expect("room for 64");
/// }
/// while !calls.is_empty() {
///     calls.wait(None, |place, result| println!("{place}: {result:?}"));
/// }
/// # Ok(()) }
/// ```
pub struct InFlight<F: Future> {
    calls: Vec<Option<F>>,
    /// Places with no call, the most recently freed last.
    free: Vec<usize>,
    wakers: Vec<Waker>,
    woken: Arc<Woken>,
    /// The wakers wake the thread that made the set.
    _this_thread: PhantomData<*const ()>,
}

struct Woken {
    thread: Thread,
    any: AtomicBool,
    places: Vec<AtomicBool>,
}

/// The waker of one place of a set.
struct PlaceWaker {
    woken: Arc<Woken>,
    place: usize,
}

impl Wake for PlaceWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.places[self.place].store(true, Ordering::Release);
        self.woken.any.store(true, Ordering::Release);
        // Costs no system call unless the thread sleeps.
        self.woken.thread.unpark();
    }
}

impl<F: Future + Unpin> InFlight<F> {
    /// A set with room for `capacity` calls (a client has that many slots at most in flight;
    /// calls beyond its slots wait for one inside their future).
    pub fn new(capacity: usize) -> InFlight<F> {
        let woken = Arc::new(Woken {
            thread: std::thread::current(),
            any: AtomicBool::new(false),
            places: (0..capacity).map(|_| AtomicBool::new(false)).collect(),
        });
        InFlight {
            calls: (0..capacity).map(|_| None).collect(),
            free: (0..capacity).rev().collect(),
            wakers: (0..capacity)
                .map(|place| Waker::from(Arc::new(PlaceWaker { woken: woken.clone(), place })))
                .collect(),
            woken,
            _this_thread: PhantomData,
        }
    }

    /// Calls in flight.
    pub fn len(&self) -> usize {
        self.calls.len() - self.free.len()
    }

    /// Whether no call is in flight.
    pub fn is_empty(&self) -> bool {
        self.free.len() == self.calls.len()
    }

    /// Whether every place holds a call.
    pub fn is_full(&self) -> bool {
        self.free.is_empty()
    }

    /// Adds `call` and polls it once (which sends it, if it was not sent as it was made);
    /// gives its place, or the call back when every place is taken. A call that completes in
    /// that poll is reported by the next [`poll`](Self::poll) or [`wait`](Self::wait), like any
    /// other.
    pub fn push(&mut self, call: F) -> Result<usize, F> {
        let Some(&place) = self.free.last() else { return Err(call) };
        self.calls[place] = Some(call);
        Ok(self.taken(place))
    }

    /// Makes a call with `make` and adds it, as [`push`](Self::push) does; `None`, and `make`
    /// not called, when every place is taken. The call is made where it stays rather than
    /// made by the caller and moved in: a call's future is hundreds of bytes, and at 16 calls
    /// in flight over shared memory the move cost ~70 instructions a call (4% of the caller's).
    #[inline]
    pub fn push_with(&mut self, make: impl FnOnce() -> F) -> Option<usize> {
        let &place = self.free.last()?;
        self.calls[place] = Some(make());
        Some(self.taken(place))
    }

    /// Takes `place` (the last free one, its call now in it) off the free list, once the call
    /// is there (a `make` that panicked leaves it free), and marks it to be polled at the next
    /// look, as if woken: its first poll sends the call if it is lazy.
    #[inline]
    fn taken(&mut self, place: usize) -> usize {
        self.free.pop();
        self.woken.places[place].store(true, Ordering::Relaxed);
        self.woken.any.store(true, Ordering::Relaxed);
        place
    }

    /// Polls every call woken since the last look, without sleeping; `done(place, result)` for
    /// each that completed. Returns how many did.
    pub fn poll(&mut self, mut done: impl FnMut(usize, F::Output)) -> usize {
        // Loads before swaps: a swap is a locked instruction, and most places were not woken.
        if !self.woken.any.load(Ordering::Relaxed) || !self.woken.any.swap(false, Ordering::Acquire) {
            return 0;
        }
        let mut finished = 0;
        for place in 0..self.calls.len() {
            let flag = &self.woken.places[place];
            if !flag.load(Ordering::Relaxed) || !flag.swap(false, Ordering::Acquire) {
                continue;
            }
            let Some(call) = self.calls[place].as_mut() else { continue };
            let mut cx = Context::from_waker(&self.wakers[place]);
            if let Poll::Ready(r) = Pin::new(call).poll(&mut cx) {
                self.calls[place] = None;
                self.free.push(place);
                finished += 1;
                done(place, r);
            }
        }
        finished
    }

    /// Polls woken calls until at least one completes, sleeping while none is woken, or until
    /// `timeout` passes; `done(place, result)` for each that completed. Returns how many did
    /// (0: the time ran out, or the set is empty).
    pub fn wait(&mut self, timeout: Option<Duration>, mut done: impl FnMut(usize, F::Output)) -> usize {
        let until = timeout.map(|t| Instant::now() + t);
        loop {
            if self.is_empty() {
                return 0;
            }
            let n = self.poll(&mut done);
            if n > 0 {
                return n;
            }
            if self.woken.any.load(Ordering::Acquire) {
                continue;
            }
            match until {
                None => std::thread::park(),
                Some(until) => {
                    let now = Instant::now();
                    if now >= until {
                        return 0;
                    }
                    std::thread::park_timeout(until - now);
                }
            }
        }
    }
}

/// Runs every call to its end on this thread and gives their results in order: blocking code's
/// way to have several calls in flight at once (make them with the `*_async` methods; each is
/// sent as it is made).
pub fn wait_all<F: Future + Unpin>(calls: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let calls: Vec<F> = calls.into_iter().collect();
    let mut results: Vec<Option<F::Output>> = calls.iter().map(|_| None).collect();
    let mut set = InFlight::new(calls.len());
    for call in calls {
        // As many places as calls.
        let _ = set.push(call);
    }
    while !set.is_empty() {
        set.wait(None, |place, r| results[place] = Some(r));
    }
    results.into_iter().map(|r| r.expect("every call completed")).collect()
}

/// Runs one call (any future) to its end on this thread.
pub fn wait<F: Future>(call: F) -> F::Output {
    let mut call = std::pin::pin!(call);
    let woken = Arc::new(Woken {
        thread: std::thread::current(),
        any: AtomicBool::new(false),
        places: vec![AtomicBool::new(false)],
    });
    let waker = Waker::from(Arc::new(PlaceWaker { woken: woken.clone(), place: 0 }));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = call.as_mut().poll(&mut cx) {
            return v;
        }
        if !woken.any.swap(false, Ordering::Acquire) {
            std::thread::park();
        }
    }
}
