//! The worker pool of a server: threads for long-running procedures, behind a bounded queue
//! (calls beyond it are answered `Busy` at once rather than queued without limit). A finished
//! job's result goes back to the serving thread that took the call through that endpoint's
//! [`Completions`], which ring its doorbell.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Barrier, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lowlat_proto::Status;

use super::dispatch;
use crate::doorbell::EndpointShared;
use crate::program::{CallContext, Procedure};

/// A long-running call for the pool.
pub(crate) struct Job {
    pub proc: Procedure,
    pub ctx: CallContext,
    pub args: Vec<u8>,
    pub reply_to: ReplyTo,
    /// The call's span, entered while the procedure runs ([`crate::ServerConfig::spans`]).
    pub span: Option<tracing::Span>,
}

/// Where a job's result goes: its endpoint's [`Completions`], under the call's key there.
pub(crate) type ReplyTo = Box<dyn FnOnce(Status, &[u8]) + Send>;

/// Results finished away from the serving thread for one endpoint, keyed as its protocol engine
/// names calls, until its serving thread sends them.
pub(crate) struct Completions<K> {
    done: Mutex<Finished<K>>,
    shared: Arc<EndpointShared>,
}

/// Calls finished, each with its status and its result in `results`. Two of these change
/// places at each look ([`Completions::take`]), so once grown they take results without
/// allocating.
pub(crate) struct Finished<K> {
    pub calls: Vec<(K, Status, Range<usize>)>,
    pub results: Vec<u8>,
}

impl<K> Finished<K> {
    /// Room for `calls` answers of `bytes` in all, made once, so that the first that come back
    /// allocate nothing (a seat taken while its thread was preempted in a procedure, under a
    /// steady load).
    pub fn with_capacity(calls: usize, bytes: usize) -> Self {
        Finished { calls: Vec::with_capacity(calls), results: Vec::with_capacity(bytes) }
    }
}

impl<K: Send + 'static> Completions<K> {
    pub fn new(shared: Arc<EndpointShared>, room: (usize, usize)) -> Arc<Completions<K>> {
        Arc::new(Completions { done: Mutex::new(Finished::with_capacity(room.0, room.1)), shared })
    }

    /// Where the result of the call `key` goes.
    pub fn reply_to(self: &Arc<Self>, key: K) -> ReplyTo {
        let me = self.clone();
        Box::new(move |status, result| me.deliver(key, status, result))
    }

    /// Hands the result of the call `key` to its serving thread (and rings its doorbell).
    pub fn deliver(&self, key: K, status: Status, result: &[u8]) {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        let at = done.results.len();
        done.results.extend_from_slice(result);
        let range = at..done.results.len();
        done.calls.push((key, status, range));
        drop(done);
        self.shared.doorbell.ring();
    }

    /// Moves the finished results into `into`, leaving its buffers (emptied) for the next ones.
    pub fn take(&self, into: &mut Finished<K>) {
        into.calls.clear();
        into.results.clear();
        std::mem::swap(into, &mut self.done.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

/// The pool's threads and the queue in front of them.
pub(crate) struct Workers {
    pub queue: SyncSender<Job>,
    threads: Vec<JoinHandle<()>>,
    /// Jobs still queued are dropped, not run: their calls were answered "may have executed"
    /// when a stop's time ran out.
    cancelled: Arc<AtomicBool>,
}

impl Workers {
    pub fn start(n: usize, depth: usize) -> Workers {
        let (tx, rx) = sync_channel::<Job>(depth.max(1));
        let rx = Arc::new(Mutex::new(rx));
        let cancelled = Arc::new(AtomicBool::new(false));
        let n = n.max(1);
        // Each thread is under way before the server is: a thread's own start-up (which
        // allocates) then never falls among the calls it serves.
        let started = Arc::new(Barrier::new(n + 1));
        let threads = (0..n)
            .map(|i| {
                let rx: Arc<Mutex<Receiver<Job>>> = rx.clone();
                let started = started.clone();
                let cancelled = cancelled.clone();
                std::thread::Builder::new()
                    .name(format!("lowlat-worker-{i}"))
                    .spawn(move || {
                        // Termination signals are the application's to take, never a worker's.
                        let _ = lowlat_sys::block_server_signals();
                        started.wait();
                        loop {
                            let job = match rx.lock().map(|r| r.recv()) {
                                Ok(Ok(job)) => job,
                                _ => return,
                            };
                            if cancelled.load(Ordering::Acquire) {
                                continue;
                            }
                            let _entered = job.span.as_ref().map(tracing::Span::enter);
                            let mut reply = Vec::new();
                            let status = dispatch::run(&job.proc, &job.ctx, &job.args, &mut (&mut reply).into());
                            (job.reply_to)(status, &reply);
                        }
                    })
                    .expect("spawn worker thread")
            })
            .collect();
        started.wait();
        Workers { queue: tx, threads, cancelled }
    }

    /// Closes the queue, runs no job still queued if `cancel`, and waits until `deadline` for
    /// the threads to finish; returns how many were still inside a procedure then (left to
    /// finish on their own).
    pub fn stop(self, cancel: bool, deadline: Instant) -> u64 {
        self.cancelled.store(cancel, Ordering::Release);
        drop(self.queue);
        join_by(self.threads, deadline)
    }
}

/// Joins the threads that finish by `deadline`; returns how many did not (they are detached).
pub(crate) fn join_by(threads: Vec<JoinHandle<()>>, deadline: Instant) -> u64 {
    let mut left = 0;
    for t in threads {
        while !t.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        if t.is_finished() {
            let _ = t.join();
        } else {
            left += 1;
        }
    }
    left
}
