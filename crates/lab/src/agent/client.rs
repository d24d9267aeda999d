//! The laboratory's side of an agent: a keyed binding to it, a lease renewed from a thread of
//! its own while the laboratory runs, and the far ends it started ([`RemoteProcess`]), each
//! stopped by PID when dropped.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lowlat::{Client, ClientConfig, Psk, SpinPolicy};
use lowlat_report::Machine;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{
    AgentError, LineRequest, Opened, Role, SpawnRequest, Spawned, StopRequest, CLOSE, DEFAULT_PORT, LINE, MACHINE,
    OPEN, PROCEDURES, PROGRAM, RENEW, SPAWN, STOP, VERSION,
};

/// How long a quick request (open, renew, describe) may take.
const QUICK: Duration = Duration::from_secs(5);
/// How long a start may take: the agent gives a child 10 s to become ready.
const SPAWN_WITHIN: Duration = Duration::from_secs(20);
/// How long a stop may take: the agent gives a child 2 s after SIGTERM.
const STOP_WITHIN: Duration = Duration::from_secs(10);

/// `HOST[:PORT]` (a name, an IPv4 address or a bracketed IPv6 one) as a socket address, the
/// port [`DEFAULT_PORT`] when none is given; a name resolves through the system's resolver.
pub fn parse_address(address: &str) -> Result<SocketAddr, AgentError> {
    let bad = |reason: String| AgentError::Address { address: address.to_string(), reason };
    if let Ok(a) = address.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = address.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, DEFAULT_PORT));
    }
    let (host, port) = match address.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().map_err(|_| bad(format!("port {p:?} is not a number from 0 to 65535")))?),
        None => (address, DEFAULT_PORT),
    };
    if host.is_empty() || host.contains(['/', ' ']) {
        return Err(bad("give HOST or HOST:PORT".into()));
    }
    let mut found = (host, port).to_socket_addrs().map_err(|e| bad(e.to_string()))?;
    found.next().ok_or_else(|| bad(format!("{host} has no address")))
}

/// One call of the agent's program, the argument and the result as JSON.
fn call<A: Serialize, R: DeserializeOwned>(
    client: &Client,
    proc_no: u32,
    arg: &A,
    timeout: Duration,
) -> Result<R, lowlat::Error> {
    let body = serde_json::to_vec(arg).expect("plain data always serializes");
    client.call_timeout(
        proc_no,
        timeout,
        |out| {
            out.extend_from_slice(&body);
            Ok::<_, serde_json::Error>(())
        },
        |r| serde_json::from_slice(r),
    )
}

/// A binding to an agent, holding a lease on the children it starts for this caller; dropping
/// it closes the lease, which stops them all.
pub struct AgentClient {
    client: Arc<Client>,
    addr: SocketAddr,
    lease: u64,
    beat: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl std::fmt::Debug for AgentClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentClient").field("addr", &self.addr).field("lease", &self.lease).finish()
    }
}

impl AgentClient {
    /// Binds to the agent at `address` (`HOST[:PORT]`) with `key`, and opens a lease, renewed
    /// from a thread of its own until this client is dropped. Without the agent's key the bind
    /// is refused: [`AgentError::Refused`].
    pub fn connect(address: &str, key: Option<Psk>) -> Result<AgentClient, AgentError> {
        let addr = parse_address(address)?;
        let agent = addr.to_string();
        let cfg = ClientConfig {
            psk: key,
            // The agent's control traffic must not take CPU time from the measurements.
            spin: SpinPolicy::Block,
            deadline: QUICK,
            bind_timeout: QUICK,
            ..ClientConfig::default()
        };
        let client = Client::connect_with(&format!("tcp://{addr}"), PROGRAM, VERSION, cfg)
            .map_err(|source| match source {
                lowlat::Error::KeyMismatch { .. } | lowlat::Error::UnauthenticatedRefusal { .. } => {
                    AgentError::Refused { agent: agent.clone(), source }
                }
                source => AgentError::Unreachable { agent: agent.clone(), source },
            })?
            .name_procedures(&PROCEDURES);
        let client = Arc::new(client);
        let opened: Opened =
            call(&client, OPEN, &(), QUICK).map_err(|source| AgentError::Call { agent: agent.clone(), source })?;
        let stop = Arc::new(AtomicBool::new(false));
        let beat = {
            let (client, stop) = (client.clone(), stop.clone());
            let every = Duration::from_millis((opened.lease_ms / 4).clamp(100, 2_000));
            std::thread::Builder::new()
                .name("agent lease".into())
                .spawn(move || renew_until(&client, opened.lease, every, &stop))
                .expect("spawning a thread")
        };
        Ok(AgentClient { client, addr, lease: opened.lease, beat: Some((stop, beat)) })
    }

    /// The agent's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn error(&self, source: lowlat::Error) -> AgentError {
        AgentError::Call { agent: self.addr.to_string(), source }
    }

    /// The agent's machine, with its interface toward this caller.
    pub fn machine(&self) -> Result<Machine, AgentError> {
        call(&self.client, MACHINE, &(), QUICK).map_err(|e| self.error(e))
    }

    /// Starts `role` on the agent's host and waits until it serves.
    pub fn spawn(&self, role: Role) -> Result<RemoteProcess, AgentError> {
        let req = SpawnRequest { lease: self.lease, role };
        let s: Spawned = call(&self.client, SPAWN, &req, SPAWN_WITHIN).map_err(|e| self.error(e))?;
        Ok(RemoteProcess {
            client: self.client.clone(),
            agent: self.addr,
            lease: self.lease,
            pid: s.pid,
            uris: s.uris,
            stopped: false,
        })
    }

    /// Closes the lease: the agent stops every child it started for this client. Returns how
    /// many it stopped.
    pub fn close(mut self) -> Result<u32, AgentError> {
        self.close_lease()
    }

    fn close_lease(&mut self) -> Result<u32, AgentError> {
        if let Some((stop, beat)) = self.beat.take() {
            stop.store(true, Ordering::Relaxed);
            let _ = beat.join();
            return call(&self.client, CLOSE, &self.lease, Duration::from_secs(60)).map_err(|e| self.error(e));
        }
        Ok(0)
    }
}

impl Drop for AgentClient {
    fn drop(&mut self) {
        if let Err(e) = self.close_lease() {
            tracing::warn!(error = %e, "closing the agent's lease failed: its children stop when the lease lapses");
        }
    }
}

/// Renews `lease` every `every` until `stop`.
fn renew_until(client: &Client, lease: u64, every: Duration, stop: &AtomicBool) {
    let mut next = Instant::now() + every;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
        if Instant::now() < next {
            continue;
        }
        next = Instant::now() + every;
        if let Err(e) = call::<_, ()>(client, RENEW, &lease, QUICK) {
            tracing::warn!(error = %e, "renewing the agent's lease failed");
        }
    }
}

/// A far end the agent started; dropping it stops it (by PID, on the agent's host).
pub struct RemoteProcess {
    client: Arc<Client>,
    agent: SocketAddr,
    lease: u64,
    /// Its process id on the agent's host.
    pub pid: u32,
    /// The URIs it printed, as it printed them (see [`reachable`]).
    pub uris: Vec<String>,
    stopped: bool,
}

impl std::fmt::Debug for RemoteProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteProcess").field("agent", &self.agent).field("pid", &self.pid).finish()
    }
}

impl RemoteProcess {
    /// The next line it prints, waiting at most `timeout` (None also when the agent cannot be
    /// asked).
    pub fn next_line(&self, timeout: Duration) -> Option<String> {
        let req = LineRequest { lease: self.lease, pid: self.pid, timeout_ms: timeout.as_millis() as u64 };
        call::<_, Option<String>>(&self.client, LINE, &req, timeout + QUICK).ok().flatten()
    }

    /// Stops it; returns the lines it printed since the last one read.
    pub fn stop(mut self) -> Result<Vec<String>, AgentError> {
        self.stopped = true;
        call(&self.client, STOP, &StopRequest { lease: self.lease, pid: self.pid }, STOP_WITHIN)
            .map_err(|source| AgentError::Call { agent: self.agent.to_string(), source })
    }
}

impl Drop for RemoteProcess {
    fn drop(&mut self) {
        if !self.stopped {
            let req = StopRequest { lease: self.lease, pid: self.pid };
            if let Err(e) = call::<_, Vec<String>>(&self.client, STOP, &req, STOP_WITHIN) {
                tracing::warn!(pid = self.pid, error = %e, "stopping a far end failed: it stops with the lease");
            }
        }
    }
}

/// `uri` as a caller reaches it: a server on the agent's host that printed a wildcard address
/// (`udp://0.0.0.0:PORT`, `tcp://[::]:PORT`) is at the agent's own address.
pub fn reachable(uri: &str, agent: IpAddr) -> String {
    let Some((scheme, rest)) = uri.split_once("://") else { return uri.to_string() };
    let Some((host, port)) = rest.rsplit_once(':') else { return uri.to_string() };
    let wildcard =
        matches!(host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>(), Ok(ip) if ip.is_unspecified());
    if !wildcard {
        return uri.to_string();
    }
    match agent {
        IpAddr::V4(a) => format!("{scheme}://{a}:{port}"),
        IpAddr::V6(a) => format!("{scheme}://[{a}]:{port}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_take_a_default_port() {
        assert_eq!(parse_address("10.1.2.3").unwrap(), "10.1.2.3:7460".parse().unwrap());
        assert_eq!(parse_address("10.1.2.3:99").unwrap(), "10.1.2.3:99".parse().unwrap());
        assert_eq!(parse_address("[::1]").unwrap(), "[::1]:7460".parse().unwrap());
        assert_eq!(parse_address("[::1]:5").unwrap(), "[::1]:5".parse().unwrap());
        assert_eq!(parse_address("localhost:6").unwrap().port(), 6);
        for bad in ["10.1.2.3:x", "10.1.2.3:70000", ":5", "a b", "udp://h/x"] {
            assert!(matches!(parse_address(bad), Err(AgentError::Address { .. })), "{bad}");
        }
    }

    #[test]
    fn wildcards_become_the_agents_address() {
        let a: IpAddr = "10.77.0.1".parse().unwrap();
        assert_eq!(reachable("udp://0.0.0.0:4000", a), "udp://10.77.0.1:4000");
        assert_eq!(reachable("onc+tcp://[::]:4000", a), "onc+tcp://10.77.0.1:4000");
        assert_eq!(reachable("tcp://10.77.0.9:4000", a), "tcp://10.77.0.9:4000");
        assert_eq!(reachable("eth://veth0", a), "eth://veth0");
    }
}
