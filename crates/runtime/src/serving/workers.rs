//! The worker pool of a server: threads for long-running procedures, behind a bounded queue
//! (calls beyond it are answered `Busy` at once rather than queued without limit). A finished
//! job's result goes back to the serving thread that took the call through that endpoint's
//! [`Completions`], which ring its doorbell.

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
pub(crate) type ReplyTo = Box<dyn FnOnce(Status, Vec<u8>) + Send>;

/// Results finished by workers for one endpoint, keyed as its protocol engine names calls, until
/// its serving thread sends them.
pub(crate) struct Completions<K> {
    done: Mutex<Vec<(K, Status, Vec<u8>)>>,
    shared: Arc<EndpointShared>,
}

impl<K: Send + 'static> Completions<K> {
    pub fn new(shared: Arc<EndpointShared>) -> Arc<Completions<K>> {
        Arc::new(Completions { done: Mutex::new(Vec::new()), shared })
    }

    /// Where the result of the call `key` goes.
    pub fn reply_to(self: &Arc<Self>, key: K) -> ReplyTo {
        let me = self.clone();
        Box::new(move |status, result| {
            me.done.lock().unwrap_or_else(|p| p.into_inner()).push((key, status, result));
            me.shared.doorbell.ring();
        })
    }

    /// Moves the finished results into `into` (empty), leaving its buffer for the next ones.
    pub fn take(&self, into: &mut Vec<(K, Status, Vec<u8>)>) {
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
                            (job.reply_to)(status, reply);
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
