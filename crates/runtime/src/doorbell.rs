//! How other threads reach a serving thread: its doorbell (an eventfd it also waits on), its stop
//! and drain flags, what its drain did, and the board it publishes its counters on when asked;
//! and an endpoint's serving threads all at once ([`EndpointThreads`]), as the server and the
//! stats program see them.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use crate::stats::StatsBoard;
use crate::Error;

/// Wakes a serving thread from another thread.
pub(crate) struct Doorbell {
    bell: lowlat_sys::EventFd,
    /// Set before ringing, so the serving thread's spin loop notices without a system call.
    attention: AtomicBool,
}

impl Doorbell {
    pub fn new() -> io::Result<Doorbell> {
        Ok(Doorbell { bell: lowlat_sys::EventFd::new()?, attention: AtomicBool::new(false) })
    }

    pub fn ring(&self) {
        self.attention.store(true, Ordering::Release);
        self.bell.ring();
    }

    /// Whether it rang since the last call (and quiets it).
    pub fn take(&self) -> bool {
        // A plain load first: this runs on every poll of a spinning server, and a swap is a
        // locked instruction even when there is nothing to take.
        if !self.attention.load(Ordering::Relaxed) || !self.attention.swap(false, Ordering::Acquire) {
            return false;
        }
        self.bell.drain();
        true
    }

    pub fn raw_fd(&self) -> RawFd {
        self.bell.as_raw_fd()
    }
}

/// State shared between one serving thread and the outside world.
pub(crate) struct EndpointShared {
    pub doorbell: Doorbell,
    /// [`RUNNING`], [`SHEDDING`], [`DRAINING`] or [`STOPPING`]: one load per turn of the serving
    /// loop.
    pub state: AtomicU8,
    /// What the serving thread's drain did, written as it ends.
    pub drained: Mutex<Drained>,
    /// Where the serving thread publishes its counters when asked.
    pub stats: StatsBoard,
}

/// Serving.
pub(crate) const RUNNING: u8 = 0;
/// Stopping gracefully: no new call runs, the ones in progress finish, then the thread ends.
pub(crate) const DRAINING: u8 = 1;
/// Stopping now: the calls still on the worker pool are answered "may have executed", and the
/// thread ends.
pub(crate) const STOPPING: u8 = 2;
/// Shedding load: every new call is answered `Busy` without running it, until told to run
/// calls again ([`Server::shed_load`](crate::Server::shed_load)).
pub(crate) const SHEDDING: u8 = 3;

/// What a graceful stop did ([`Server::shutdown`](crate::Server::shutdown)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drained {
    /// Calls in progress when the stop began that finished and were answered.
    pub completed: u64,
    /// Calls that arrived during the stop: answered, without running them, that the server is
    /// stopping (`Error::Busy` over lowlat's protocol, SYSTEM_ERR over ONC RPC).
    pub refused: u64,
    /// Calls still running when the stop's time ran out: answered that they may have executed
    /// (`Error::ServerError`), and their results, if they come, are dropped.
    pub abandoned: u64,
    /// Threads (serving or worker) still inside a procedure when the stop's time ran out: left
    /// to finish on their own, holding what they hold until they do.
    pub threads_left: u64,
}

impl Drained {
    pub(crate) fn add(&mut self, o: Drained) {
        self.completed += o.completed;
        self.refused += o.refused;
        self.abandoned += o.abandoned;
        self.threads_left += o.threads_left;
    }
}

impl EndpointShared {
    pub fn new() -> Result<Arc<EndpointShared>, Error> {
        let doorbell = Doorbell::new().map_err(|e| Error::io("create eventfd", e))?;
        Ok(Arc::new(EndpointShared {
            doorbell,
            state: AtomicU8::new(RUNNING),
            drained: Mutex::new(Drained::default()),
            stats: StatsBoard::default(),
        }))
    }

    /// Asks the serving thread to stop now, and wakes it.
    pub fn stop(&self) {
        self.state.store(STOPPING, Ordering::Release);
        self.doorbell.ring();
    }

    /// Asks the serving thread to stop once the calls in progress are done, and wakes it.
    pub fn drain(&self) {
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| matches!(s, RUNNING | SHEDDING).then_some(DRAINING));
        self.doorbell.ring();
    }

    /// Tells the serving thread to shed load (answer every new call `Busy`) or to run calls
    /// again; a stopping thread stays stopping.
    pub fn shed(&self, on: bool) {
        let (from, to) = if on { (RUNNING, SHEDDING) } else { (SHEDDING, RUNNING) };
        let _ = self.state.compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire);
        self.doorbell.ring();
    }
}

/// Asks a serving thread for a copy of its counters (ringing it awake); the number to wait for.
fn ask(thread: &EndpointShared) -> u64 {
    let n = thread.stats.ask();
    thread.doorbell.ring();
    n
}

/// Every serving thread of one endpoint, asked together: their counters and times added up,
/// their state changed together.
pub(crate) struct EndpointThreads {
    pub each: Vec<Arc<EndpointShared>>,
}

impl EndpointThreads {
    /// The endpoint's counters and calls' times: every thread is asked at once, then each is
    /// waited for up to `patience` (a thread busy longer gives the copy it published last).
    pub fn snapshot(&self, patience: std::time::Duration) -> crate::stats::Snapshot {
        let asked: Vec<u64> = self.each.iter().map(|t| ask(t)).collect();
        let end = std::time::Instant::now() + patience;
        let mut sum = crate::stats::Snapshot::default();
        for (t, n) in self.each.iter().zip(asked) {
            let snap = t.stats.wait(n, end.saturating_duration_since(std::time::Instant::now()));
            sum.counters = sum.counters.plus(&snap.counters);
            if sum.times.len() < snap.times.len() {
                sum.times.resize_with(snap.times.len(), Default::default);
            }
            for (a, b) in sum.times.iter_mut().zip(&snap.times) {
                a.add(b);
            }
        }
        sum
    }

    /// One thread's counters and times, waiting up to `patience` for them.
    pub fn one(thread: &EndpointShared, patience: std::time::Duration) -> crate::stats::Snapshot {
        let n = ask(thread);
        thread.stats.wait(n, patience)
    }

    /// The endpoint's counters ([`snapshot`](Self::snapshot)).
    pub fn stats(&self, patience: std::time::Duration) -> crate::EndpointStats {
        self.snapshot(patience).counters
    }

    /// What the threads' drains did, added up.
    pub fn drained(&self) -> Drained {
        let mut d = Drained::default();
        for t in &self.each {
            d.add(*t.drained.lock().unwrap_or_else(|p| p.into_inner()));
        }
        d
    }

    pub fn stop(&self) {
        self.each.iter().for_each(|t| t.stop());
    }

    pub fn drain(&self) {
        self.each.iter().for_each(|t| t.drain());
    }

    pub fn shed(&self, on: bool) {
        self.each.iter().for_each(|t| t.shed(on));
    }
}
