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
use crate::{Endpoint, Error, Program, ServerConfig};

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
        let mut server = Server { endpoints: Vec::new(), workers: Some(workers) };
        // Declared after `server`, so dropped before it when a URI fails: the workers end only
        // once every sender of their queue is gone, and dropping the server waits for them.
        let queue = server.workers.as_ref().map(|w| w.queue.clone()).expect("workers just started");
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
                seed: random_seed()?,
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

/// 64 random bits from the kernel, for an engine's seed.
pub(crate) fn random_seed() -> Result<u64, Error> {
    lowlat_sys::random::u64().map_err(|e| Error::io("draw a random seed", e))
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
