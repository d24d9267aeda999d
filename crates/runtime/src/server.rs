//! The server: one thread per endpoint (`crate::serving`) runs a protocol's engine over the
//! endpoint's transport (`crate::driver`) and, by default, the procedures themselves; long-running
//! procedures go to a worker pool shared by the endpoints (`crate::serving::workers`).
//!
//! A server stops gracefully ([`Server::shutdown`], [`Server::wait_for_signal`], and when it is
//! dropped): each endpoint runs no new call (it answers that the server is stopping), finishes
//! the calls in progress, its worker pool's too, and ends; what is still running when the stop's
//! time runs out is answered "may have executed" and left to finish on its own.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lowlat_proto::{Census, Shard};

use crate::doorbell::{Drained, EndpointShared, EndpointThreads};
use crate::driver;
use crate::metrics::{MetricsServer, Sources};
use crate::serving::routes::Services;
use crate::serving::workers::{self, Workers};
use crate::serving::{self, Context};
use crate::{Endpoint, EndpointStats, Error, Program, ServerConfig};

/// How long a stop whose time ran out waits for the threads to answer what they hold and end.
const STOP_GRACE: Duration = Duration::from_millis(100);
/// How long `serve` waits for its serving threads to set themselves up: far more than a start
/// takes, even on a loaded machine; past it, the threads go on starting on their own.
const START_WAIT: Duration = Duration::from_secs(10);

/// A running server. Dropping it stops it, as [`shutdown`](Self::shutdown) does.
pub struct Server {
    endpoints: Vec<Served>,
    workers: Option<Workers>,
    drain_timeout: Duration,
    /// The `/metrics` thread, when asked for ([`ServerBuilder::metrics`]).
    metrics: Option<MetricsServer>,
}

/// One endpoint being served, by one thread or several.
struct Served {
    uri: String,
    shared: Arc<EndpointThreads>,
    threads: Vec<JoinHandle<()>>,
}

impl Served {
    fn running(&self) -> bool {
        self.threads.iter().any(|h| !h.is_finished())
    }
}

/// Collects programs and settings, then serves them on URIs.
#[derive(Default)]
pub struct ServerBuilder {
    services: Services,
    config: ServerConfig,
    metrics: Option<SocketAddr>,
}

impl ServerBuilder {
    /// Adds a program version to serve.
    pub fn program(mut self, p: Program) -> Self {
        self.services.add(p);
        self
    }

    /// Sets the configuration, replacing the default.
    pub fn config(mut self, c: ServerConfig) -> Self {
        self.config = c;
        self
    }

    /// Also serves every endpoint's counters and calls' times in the Prometheus/OpenMetrics
    /// text format at `http://ADDR/metrics`, on a thread of its own (`crate::metrics`; port 0
    /// picks a free one: [`Server::metrics_addr`]). Nothing is added to the call path: each
    /// scrape asks the serving threads for a copy, as [`Server::stats`] does.
    pub fn metrics(mut self, addr: SocketAddr) -> Self {
        self.metrics = Some(addr);
        self
    }

    /// Starts serving every URI (one thread each), and returns once every serving thread has
    /// set itself up (or ten seconds have passed), so none of their start-up work overlaps the
    /// caller's first calls. Fails without serving any if one fails.
    pub fn serve<S: AsRef<str>>(self, uris: &[S]) -> Result<Server, Error> {
        let services = Arc::new(self.services);
        let workers = Workers::start(self.config.workers, self.config.worker_queue);
        let mut server = Server {
            endpoints: Vec::new(),
            workers: Some(workers),
            drain_timeout: self.config.drain_timeout,
            metrics: None,
        };
        // Declared after `server`, so dropped before it when a URI fails: the workers end only
        // once every sender of their queue is gone, and dropping the server waits for them.
        let queue = server.workers.as_ref().map(|w| w.queue.clone()).expect("workers just started");
        let threads = self.config.serving_threads();
        let (ready, readied) = std::sync::mpsc::sync_channel(uris.len() * threads);
        for uri in uris {
            let uri = uri.as_ref();
            let endpoint: Endpoint = uri.parse()?;
            if self.config.encrypt {
                let reason = if self.config.psk.is_none() {
                    Some("encryption needs a pre-shared key (--psk-file): the frames' keys come from it")
                } else if endpoint.scheme() == "shm" {
                    Some("encryption is refused over shm://: the peer shares the memory the frames lie in (serve shm:// from a server without --encrypt)")
                } else if endpoint.scheme().starts_with("onc") {
                    Some("ONC RPC carries no pre-shared key, so it cannot be encrypted (serve onc+ endpoints from a server without --encrypt)")
                } else {
                    None
                };
                if let Some(reason) = reason {
                    return Err(Error::Encryption { uri: uri.to_string(), reason: reason.into() });
                }
            }
            // One context per serving thread: its own doorbell, one secret and seed for all.
            let each = (0..threads).map(|_| EndpointShared::new()).collect::<Result<Vec<_>, Error>>()?;
            let shared = Arc::new(EndpointThreads { each });
            let census = (threads > 1).then(|| Arc::new(Census::default()));
            let (seed, secret) = (random_seed()?, random_secret()?);
            let stats_proc = serving::lowlat::stats_procedure(&shared, &services);
            let contexts = shared
                .each
                .iter()
                .enumerate()
                .map(|(i, own)| Context {
                    services: services.clone(),
                    config: self.config.clone(),
                    shared: own.clone(),
                    endpoint: shared.clone(),
                    shard: Shard::new(i as u16, threads as u16),
                    census: census.clone(),
                    workers: queue.clone(),
                    seed,
                    secret,
                    ready: ready.clone(),
                    stats_proc: stats_proc.clone(),
                })
                .collect();
            let start = serving::Start { thread: format!("lowlat-{}", endpoint.scheme()), contexts };
            let doorbells: Vec<_> = shared.each.iter().map(|e| e.doorbell.raw_fd()).collect();
            let (local, threads) = driver::open_server(&endpoint, uri, &self.config, &doorbells, start)??;
            server.endpoints.push(Served { uri: local, shared, threads });
        }
        if let Some(addr) = self.metrics {
            let endpoints = server.endpoints.iter().map(|e| (e.uri.clone(), e.shared.clone())).collect();
            let sources = Sources { endpoints, procedures: services.procedure_names() };
            server.metrics = Some(MetricsServer::start(addr, sources)?);
        }
        // A thread that ended during its start-up drops its sender: the wait then runs out, or
        // ends at once when none is left.
        drop(ready);
        let deadline = Instant::now() + START_WAIT;
        for _ in 0..uris.len() * threads {
            let left = deadline.saturating_duration_since(Instant::now());
            if readied.recv_timeout(left).is_err() {
                break;
            }
        }
        Ok(server)
    }
}

impl Server {
    /// A builder with no programs and the default configuration.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// Where `/metrics` is served ([`ServerBuilder::metrics`]), with the real port.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(MetricsServer::local_addr)
    }

    /// The URIs served, with real port numbers where 0 was asked for.
    pub fn local_uris(&self) -> Vec<String> {
        self.endpoints.iter().map(|e| e.uri.clone()).collect()
    }

    /// Each endpoint's counters, with its URI (as [`local_uris`](Self::local_uris) gives it):
    /// read from its serving thread, exact as of the moment it answers. A thread busy for over
    /// a second in a procedure of its own gives the copy it published last.
    pub fn stats(&self) -> Vec<(String, EndpointStats)> {
        self.endpoints.iter().map(|e| (e.uri.clone(), e.shared.stats(std::time::Duration::from_secs(1)))).collect()
    }

    /// Each endpoint's counters thread by thread ([`ServerConfig::threads`]), with its URI: how
    /// the kernel spread the sessions and the calls over the threads. Their sum is
    /// [`stats`](Self::stats).
    pub fn stats_per_thread(&self) -> Vec<(String, Vec<EndpointStats>)> {
        let patience = Duration::from_secs(1);
        let each = |e: &Served| e.shared.each.iter().map(|t| EndpointThreads::one(t, patience).counters).collect();
        self.endpoints.iter().map(|e| (e.uri.clone(), each(e))).collect()
    }

    /// Serves until the process ends.
    pub fn wait(mut self) {
        for e in self.endpoints.iter_mut() {
            for h in e.threads.drain(..) {
                let _ = h.join();
            }
        }
    }

    /// Sheds load (`on`) or takes calls again: while shedding, every endpoint answers each new
    /// call at once without running it — [`Error::Busy`](crate::Error::Busy) over lowlat's
    /// protocol ("the server is shedding load", counted in [`EndpointStats::busy`]), SYSTEM_ERR
    /// over ONC RPC (which has no "busy") — so that a client over several servers sends it to
    /// another and leaves this one out for a while. Calls already running finish and are
    /// answered; sessions, keys and the duplicate cache are kept. For an operator who takes a
    /// server out of rotation, or a server that knows it is overloaded; `lowlat serve` does it on
    /// SIGUSR1 and takes calls again on SIGUSR2 ([`wait_for_signal`](Self::wait_for_signal)).
    pub fn shed_load(&self, on: bool) {
        for e in &self.endpoints {
            e.shared.shed(on);
        }
    }

    /// Blocks the signals [`wait_for_signal`](Self::wait_for_signal) takes (SIGTERM, SIGINT,
    /// SIGHUP, SIGUSR1, SIGUSR2) in the calling thread and every thread it starts from now on:
    /// call it first thing in `main` when threads start before the server waits, so that a stop
    /// signal always finds the wait rather than ending the process at once.
    pub fn block_stop_signals() -> Result<(), Error> {
        lowlat_sys::block_server_signals().map_err(|e| Error::io("block termination signals", e))
    }

    /// Serves until this process is asked to stop (SIGTERM, SIGINT or SIGHUP), then stops
    /// gracefully, as [`shutdown`](Self::shutdown) does, and says what the stop did. Fails if
    /// every serving thread ends first (a transport failed). Meanwhile SIGUSR1 makes the server
    /// shed load and SIGUSR2 makes it take calls again ([`shed_load`](Self::shed_load)).
    ///
    /// The signals are taken synchronously, so no handler runs anywhere: lowlat's own threads
    /// never take them, and this call blocks them in the calling thread. Call it from the main
    /// thread of a program whose other threads block them too (threads inherit the mask of the
    /// thread that starts them: block them first, with [`block_stop_signals`](Self::block_stop_signals),
    /// if `main` starts threads before serving), or a signal sent to the process may end it at
    /// once instead.
    pub fn wait_for_signal(self) -> Result<Drained, Error> {
        Server::block_stop_signals()?;
        loop {
            match lowlat_sys::wait_server_signal(Duration::from_millis(200)) {
                Some(lowlat_sys::ServerSignal::Stop(_)) => return Ok(self.shutdown()),
                Some(signal) => {
                    let on = signal == lowlat_sys::ServerSignal::Shed;
                    self.shed_load(on);
                    let what = if on {
                        "shedding load (SIGUSR1): new calls answered Busy"
                    } else {
                        "taking calls again (SIGUSR2)"
                    };
                    tracing::warn!(target: "lowlat::server", "{what}");
                }
                None => {}
            }
            if self.is_finished() {
                let e = std::io::Error::other("every serving thread stopped");
                return Err(Error::io("serving", e));
            }
        }
    }

    /// Whether every serving thread has ended (a fatal error stopped it).
    pub fn is_finished(&self) -> bool {
        self.endpoints.iter().all(|e| !e.running())
    }

    /// Stops gracefully within the server's
    /// [`ServerConfig::drain_timeout`](crate::ServerConfig::drain_timeout): runs no new call
    /// (each is answered that the server is stopping: [`Error::Busy`](crate::Error::Busy) over
    /// lowlat's protocol, never executed), finishes and answers every call in progress (the
    /// worker pool's too), and ends. Calls still running when the time runs out are answered
    /// that they may have executed. Returns what the stop did.
    pub fn shutdown(mut self) -> Drained {
        let bound = self.drain_timeout;
        self.stop_within(bound)
    }

    /// [`shutdown`](Self::shutdown) within `bound` rather than the configured time.
    pub fn shutdown_within(mut self, bound: Duration) -> Drained {
        self.stop_within(bound)
    }

    fn stop_within(&mut self, bound: Duration) -> Drained {
        if let Some(mut m) = self.metrics.take() {
            m.stop();
        }
        let Some(workers) = self.workers.take() else { return Drained::default() };
        let deadline = Instant::now() + bound;
        for e in &self.endpoints {
            e.shared.drain();
        }
        for e in &self.endpoints {
            while e.running() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // Out of time: the endpoints still draining answer what the pool holds and end.
        let out_of_time = self.endpoints.iter().any(Served::running);
        if out_of_time {
            for e in &self.endpoints {
                e.shared.stop();
            }
        }
        let grace = Instant::now() + STOP_GRACE;
        let threads = self.endpoints.iter_mut().flat_map(|e| e.threads.drain(..)).collect();
        let mut drained = Drained { threads_left: workers::join_by(threads, grace), ..Drained::default() };
        drained.threads_left += workers.stop(out_of_time, grace.max(deadline));
        for e in &self.endpoints {
            drained.add(e.shared.drained());
        }
        drained
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let bound = self.drain_timeout;
        self.stop_within(bound);
    }
}

/// 64 random bits from the kernel, for an engine's seed.
pub(crate) fn random_seed() -> Result<u64, Error> {
    lowlat_sys::random::u64().map_err(|e| Error::io("draw a random seed", e))
}

/// 32 random bytes from the kernel, for a server's secret (cookie keys, session tokens).
pub(crate) fn random_secret() -> Result<[u8; 32], Error> {
    let mut secret = [0u8; 32];
    lowlat_sys::random::fill(&mut secret).map_err(|e| Error::io("draw a random secret", e))?;
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// Serves `uris` on another thread; the outcome, or `None` if serving has not returned
    /// within 10 s.
    fn serve_bounded(uris: &'static [&'static str]) -> Option<Result<Server, Error>> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(Server::builder().serve(uris));
        });
        rx.recv_timeout(Duration::from_secs(10)).ok()
    }

    #[test]
    fn a_uri_that_cannot_be_served_fails_serving_at_once() {
        match serve_bounded(&["udp://127.0.0.1:0", "carrier-pigeon://roof"]) {
            Some(Err(Error::InvalidUri { uri, .. })) => assert_eq!(uri, "carrier-pigeon://roof"),
            Some(Ok(_)) => panic!("served a URI that is not one"),
            Some(Err(e)) => panic!("wrong error: {e}"),
            None => panic!("serving hung after a URI failed"),
        }
        match serve_bounded(&["not a uri"]) {
            Some(r) => assert!(r.is_err()),
            None => panic!("serving hung after the only URI failed"),
        }
    }

    /// Names given at run time are kept once per distinct name, however many programs use them.
    #[test]
    fn owned_procedure_names_are_kept_once_each() {
        let names = |p: &Program| p.procedures().map(|(_, n, _)| n).collect::<Vec<&'static str>>();
        let a = names(&Program::new(1, 1).procedure(0, String::from("PING"), |_, _, _| Ok(())));
        let b = names(&Program::new(2, 1).long_running(3, "PING".to_string(), |_, _, _| Ok(())));
        assert_eq!((a[0], b[0]), ("PING", "PING"));
        assert!(std::ptr::eq(a[0], b[0]), "one copy of a name");
        let literal = "PONG";
        assert!(std::ptr::eq(names(&Program::new(3, 1).procedure(1, literal, |_, _, _| Ok(())))[0], literal));
    }
}
