//! The server: one thread per endpoint (`crate::serving`) runs a protocol's engine over the
//! endpoint's transport (`crate::driver`) and, by default, the procedures themselves; long-running
//! procedures go to a worker pool shared by the endpoints (`crate::workers`).

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::doorbell::EndpointShared;
use crate::driver;
use crate::service::Services;
use crate::serving::{self, Context};
use crate::workers::Workers;
use crate::{Endpoint, EndpointStats, Error, Program, ServerConfig};

/// A running server. Dropping it stops it.
pub struct Server {
    endpoints: Vec<(String, Arc<EndpointShared>, Option<JoinHandle<()>>)>,
    workers: Option<Workers>,
}

/// Collects programs and settings, then serves them on URIs.
#[derive(Default)]
pub struct ServerBuilder {
    services: Services,
    config: ServerConfig,
}

impl ServerBuilder {
    pub fn program(mut self, p: Program) -> Self {
        self.services.add(p);
        self
    }

    pub fn config(mut self, c: ServerConfig) -> Self {
        self.config = c;
        self
    }

    /// Starts serving every URI (one thread each). Fails without serving any if one fails.
    pub fn serve<S: AsRef<str>>(self, uris: &[S]) -> Result<Server, Error> {
        let services = Arc::new(self.services);
        let workers = Workers::start(self.config.workers, self.config.worker_queue);
        let queue = workers.queue.clone();
        let mut server = Server { endpoints: Vec::new(), workers: Some(workers) };
        for uri in uris {
            let uri = uri.as_ref();
            let endpoint: Endpoint = uri.parse()?;
            let shared = EndpointShared::new()?;
            let transport = driver::open_server(&endpoint, uri, &self.config, shared.doorbell.raw_fd())?;
            let local = transport.local_uri();
            let ctx = Context {
                services: services.clone(),
                config: self.config.clone(),
                shared: shared.clone(),
                workers: queue.clone(),
            };
            let handle = serving::start(transport, format!("lowlat-{}", endpoint.scheme()), ctx)?;
            server.endpoints.push((local, shared, Some(handle)));
        }
        Ok(server)
    }
}

impl Server {
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// The URIs served, with real port numbers where 0 was asked for.
    pub fn local_uris(&self) -> Vec<String> {
        self.endpoints.iter().map(|e| e.0.clone()).collect()
    }

    /// Each endpoint's counters, with its URI (as [`local_uris`](Self::local_uris) gives it):
    /// read from its serving thread, exact as of the moment it answers. A thread busy for over
    /// a second in a procedure of its own gives the copy it published last.
    pub fn stats(&self) -> Vec<(String, EndpointStats)> {
        self.endpoints.iter().map(|e| (e.0.clone(), e.1.stats(std::time::Duration::from_secs(1)))).collect()
    }

    /// Serves until the process ends.
    pub fn wait(mut self) {
        for e in self.endpoints.iter_mut() {
            if let Some(h) = e.2.take() {
                let _ = h.join();
            }
        }
    }

    /// Whether every serving thread has ended (a fatal error stopped it).
    pub fn is_finished(&self) -> bool {
        self.endpoints.iter().all(|e| e.2.as_ref().is_none_or(|h| h.is_finished()))
    }

    /// Stops serving and waits for the threads to finish.
    pub fn shutdown(mut self) {
        self.stop_all();
    }

    fn stop_all(&mut self) {
        for e in &self.endpoints {
            e.1.stop();
        }
        for e in self.endpoints.iter_mut() {
            if let Some(h) = e.2.take() {
                let _ = h.join();
            }
        }
        if let Some(w) = self.workers.take() {
            w.stop();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_all();
    }
}
