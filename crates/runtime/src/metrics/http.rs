//! `GET /metrics` over HTTP/1.1 on a thread of its own: one connection at a time (scrapers come
//! every few seconds), each request read within a bound and answered with the endpoints'
//! counters, asked of their serving threads at that moment; the connection is then closed.
//! Anything but `GET /metrics` (or `/`) is answered 404, a request that is not HTTP 400.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::{openmetrics_text, EndpointMetrics};
use crate::doorbell::EndpointThreads;
use crate::serving::routes::ProcedureName;
use crate::Error;

/// How long a scraper has to send its request, and to take the answer.
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest request head read.
const MAX_REQUEST: usize = 8 << 10;
/// How long a serving thread busy in a procedure of its own may take to publish its counters
/// before its last copy is given instead.
const PATIENCE: Duration = Duration::from_millis(500);
/// How often the thread looks whether the server is stopping, while no scraper comes.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// What the metrics thread reads: each endpoint's URI and shared state, and the names of the
/// procedures by id.
pub(crate) struct Sources {
    pub endpoints: Vec<(String, Arc<EndpointThreads>)>,
    pub procedures: Vec<(usize, ProcedureName)>,
}

impl Sources {
    /// Every endpoint's counters and times now.
    pub fn read(&self) -> Vec<EndpointMetrics> {
        self.endpoints
            .iter()
            .map(|(uri, shared)| {
                let snap = shared.snapshot(PATIENCE);
                let times = super::named_times(&self.procedures, &snap.times);
                EndpointMetrics { uri: uri.clone(), counters: snap.counters, times }
            })
            .collect()
    }
}

/// The running metrics thread of a server.
pub(crate) struct MetricsServer {
    local: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens at `addr` and serves `sources` until stopped.
    pub fn start(addr: SocketAddr, sources: Sources) -> Result<MetricsServer, Error> {
        let listener = TcpListener::bind(addr).map_err(|e| Error::io(format!("metrics: listen on {addr}"), e))?;
        let local = listener.local_addr().map_err(|e| Error::io("metrics: local address", e))?;
        listener.set_nonblocking(true).map_err(|e| Error::io("metrics: listen", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("lowlat-metrics".into())
            .spawn(move || {
                let _ = lowlat_sys::block_server_signals();
                serve(&listener, &sources, &stopping);
            })
            .map_err(|e| Error::io("spawn the metrics thread", e))?;
        Ok(MetricsServer { local, stop, thread: Some(thread) })
    }

    /// Where it listens (the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Stops the thread and waits for it.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn serve(listener: &TcpListener, sources: &Sources, stop: &AtomicBool) {
    use std::os::fd::AsRawFd;
    while !stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((conn, _)) => {
                // A scraper that misbehaves costs at most its timeouts; nothing to report.
                let _ = answer(conn, sources);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let _ = lowlat_sys::poll_readable(&[listener.as_raw_fd()], Some(STOP_CHECK));
            }
            Err(_) => std::thread::sleep(STOP_CHECK),
        }
    }
}

/// Reads one request from `conn` and answers it.
fn answer(mut conn: TcpStream, sources: &Sources) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(IO_TIMEOUT))?;
    conn.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_REQUEST {
            return respond(&mut conn, "431 Request Header Fields Too Large", "text/plain", "request too large\n");
        }
    }
    let line = head.split(|&b| b == b'\r' || b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, path, version) = (parts.next(), parts.next(), parts.next());
    if !version.is_some_and(|v| v.starts_with("HTTP/1.")) {
        return respond(&mut conn, "400 Bad Request", "text/plain", "not an HTTP/1 request\n");
    }
    let path = path.unwrap_or("/").split('?').next().unwrap_or("/");
    // Prometheus asks for OpenMetrics; what does not (promtool, curl) gets the older format.
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let openmetrics = head.lines().any(|l| l.starts_with("accept:") && l.contains("application/openmetrics-text"));
    match (method, path) {
        (Some("GET"), "/metrics" | "/") => {
            let text = openmetrics_text(&sources.read());
            if openmetrics {
                respond(&mut conn, "200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", &text)
            } else {
                let text = super::prometheus_text(&text);
                respond(&mut conn, "200 OK", "text/plain; version=0.0.4; charset=utf-8", &text)
            }
        }
        (Some("GET"), _) => respond(&mut conn, "404 Not Found", "text/plain", "lowlat serves /metrics only\n"),
        _ => respond(&mut conn, "405 Method Not Allowed", "text/plain", "GET /metrics\n"),
    }
}

fn respond(conn: &mut TcpStream, status: &str, content_type: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes())?;
    conn.write_all(body.as_bytes())?;
    conn.flush()
}
