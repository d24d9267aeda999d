//! The worker pool of a server: threads for long-running procedures, behind a bounded queue
//! (calls beyond it are answered `Busy` at once rather than queued without limit). A finished
//! job's result goes back to the serving thread that took the call through that endpoint's
//! [`Completions`], which ring its doorbell.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Barrier, Mutex};
use std::thread::JoinHandle;

use lowlat_proto::Status;

use crate::doorbell::EndpointShared;
use crate::service::{self, CallContext, Procedure};

/// A long-running call for the pool.
pub(crate) struct Job {
    pub proc: Procedure,
    pub ctx: CallContext,
    pub args: Vec<u8>,
    pub reply_to: ReplyTo,
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
}

impl Workers {
    pub fn start(n: usize, depth: usize) -> Workers {
        let (tx, rx) = sync_channel::<Job>(depth.max(1));
        let rx = Arc::new(Mutex::new(rx));
        let n = n.max(1);
        // Each thread is under way before the server is: a thread's own start-up (which
        // allocates) then never falls among the calls it serves.
        let started = Arc::new(Barrier::new(n + 1));
        let threads = (0..n)
            .map(|i| {
                let rx: Arc<Mutex<Receiver<Job>>> = rx.clone();
                let started = started.clone();
                std::thread::Builder::new()
                    .name(format!("lowlat-worker-{i}"))
                    .spawn(move || {
                        started.wait();
                        loop {
                            let job = match rx.lock().map(|r| r.recv()) {
                                Ok(Ok(job)) => job,
                                _ => return,
                            };
                            let mut reply = Vec::new();
                            let status = service::run(&job.proc, &job.ctx, &job.args, &mut (&mut reply).into());
                            (job.reply_to)(status, reply);
                        }
                    })
                    .expect("spawn worker thread")
            })
            .collect();
        started.wait();
        Workers { queue: tx, threads }
    }

    /// Closes the queue and waits for the threads to finish the jobs they hold.
    pub fn stop(self) {
        drop(self.queue);
        for t in self.threads {
            let _ = t.join();
        }
    }
}
