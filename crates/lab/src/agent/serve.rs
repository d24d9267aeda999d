//! The agent's side: the children it started, grouped by lease, and the [`Program`] that
//! answers the laboratory. Children are this executable only, with arguments built here from a
//! [`Role`]; each is a [`ServerProcess`], stopped by its PID (SIGTERM, then SIGKILL after a
//! bounded wait) when asked, when its lease lapses, and when the agent is dropped.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lowlat::{CallContext, OutBuf, ProcError, Program, SpinPolicy};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{
    facts, LineRequest, Opened, Role, Scheme, SpawnRequest, Spawned, StopRequest, CLOSE, LINE, MACHINE,
    MAX_LINE_WAIT_MS, MAX_WORKLOAD_SECONDS, OPEN, PROGRAM, RENEW, SPAWN, STOP, VERSION,
};
use crate::procs::{self, ServerProcess};

/// How long a child has to print `ready`.
const READY_WITHIN: Duration = Duration::from_secs(10);
/// How long a stopping child has between SIGTERM and SIGKILL.
const STOP_WITHIN: Duration = Duration::from_secs(2);
/// How often leases are checked.
const REAP_EVERY: Duration = Duration::from_millis(250);

/// What an agent serves with.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// The executable to run as every child: the agent's own (`lowlat`).
    pub exe: PathBuf,
    /// The key file keyed servers bind with (the agent's own key).
    pub key_file: PathBuf,
    /// The address servers of IP transports bind to (the agent's listening address; a wildcard
    /// there is a wildcard here, and the caller puts the agent's address in its place).
    pub host: IpAddr,
    /// The interface eth:// and xdp:// servers use; without one they are refused.
    pub iface: Option<String>,
    /// The CPU children are pinned to, if any.
    pub cpu: Option<usize>,
    /// How long a lease lasts without a renewal.
    pub lease: Duration,
}

/// One child and the lease it belongs to. The process sits behind its own lock so that a
/// caller waiting for its next line holds up no one else's request.
struct Child {
    lease: u64,
    process: Arc<Mutex<Option<ServerProcess>>>,
}

#[derive(Default)]
struct State {
    /// Lease number to the moment it lapses.
    leases: HashMap<u64, Instant>,
    /// PID to child.
    children: HashMap<u32, Child>,
}

/// A running agent's state: its leases and children; dropping it stops every child.
pub struct Agent {
    cfg: AgentConfig,
    state: Mutex<State>,
    stop: AtomicBool,
    reaper: Mutex<Option<JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere leaves the map as it was: still the truth about the children.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Agent {
    /// An agent with no children yet, and a thread that stops the children of lapsed leases.
    pub fn start(cfg: AgentConfig) -> Arc<Agent> {
        let agent =
            Arc::new(Agent { cfg, state: Mutex::default(), stop: AtomicBool::new(false), reaper: Mutex::default() });
        let weak = Arc::downgrade(&agent);
        let reaper = std::thread::Builder::new()
            .name("agent leases".into())
            .spawn(move || loop {
                std::thread::sleep(REAP_EVERY);
                let Some(a) = weak.upgrade() else { return };
                if a.stop.load(Ordering::Relaxed) {
                    return;
                }
                a.reap(Instant::now());
            })
            .expect("spawning a thread");
        *lock(&agent.reaper) = Some(reaper);
        agent
    }

    /// Stops every child (by PID, bounded) and the lease thread.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::Relaxed);
        // Under one lock: a start finishing meanwhile finds its lease gone and stops its child.
        let all: Vec<Child> = {
            let mut st = lock(&self.state);
            st.leases.clear();
            st.children.drain().map(|(_, c)| c).collect()
        };
        stop_all(all);
        if let Some(h) = lock(&self.reaper).take() {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }

    fn open(&self) -> Result<Opened, String> {
        // Unguessable, so that one caller cannot stop another's children by naming its lease.
        let lease = loop {
            let n = lowlat_sys::random::u64().map_err(|e| format!("no randomness for a lease: {e}"))?;
            if n != 0 && !lock(&self.state).leases.contains_key(&n) {
                break n;
            }
        };
        lock(&self.state).leases.insert(lease, Instant::now() + self.cfg.lease);
        tracing::info!(lease, "lease opened");
        Ok(Opened { lease, lease_ms: self.cfg.lease.as_millis() as u64 })
    }

    fn renew(&self, lease: u64) -> Result<(), String> {
        match lock(&self.state).leases.get_mut(&lease) {
            Some(until) => {
                *until = Instant::now() + self.cfg.lease;
                Ok(())
            }
            None => Err(format!("no lease {lease:#x}: it lapsed (its children were stopped) or was never opened")),
        }
    }

    /// Stops the children of leases that lapsed by `now`.
    fn reap(&self, now: Instant) {
        let lapsed: Vec<Child> = {
            let mut st = lock(&self.state);
            let gone: Vec<u64> = st.leases.iter().filter(|(_, until)| **until <= now).map(|(l, _)| *l).collect();
            for l in &gone {
                st.leases.remove(l);
                tracing::warn!(lease = l, "lease lapsed: stopping its children");
            }
            let pids: Vec<u32> = st.children.iter().filter(|(_, c)| gone.contains(&c.lease)).map(|(p, _)| *p).collect();
            pids.into_iter().filter_map(|p| st.children.remove(&p)).collect()
        };
        stop_all(lapsed);
    }

    fn close(&self, lease: u64) -> u32 {
        let mine: Vec<Child> = {
            let mut st = lock(&self.state);
            st.leases.remove(&lease);
            let pids: Vec<u32> = st.children.iter().filter(|(_, c)| c.lease == lease).map(|(p, _)| *p).collect();
            pids.into_iter().filter_map(|p| st.children.remove(&p)).collect()
        };
        let n = mine.len() as u32;
        stop_all(mine);
        n
    }

    /// The command line of the child that plays `role`, or why it cannot be played here.
    fn args(&self, role: &Role) -> Result<Vec<String>, String> {
        let spin_arg = |spin: &str| -> Result<String, String> {
            let s: SpinPolicy = spin.parse().map_err(|e| format!("spin policy {spin:?}: {e}"))?;
            Ok(s.to_string())
        };
        let mut args: Vec<String> = match role {
            Role::Rpc { scheme, spin, keyed } => {
                let mut a = vec!["serve".into(), self.bind_uri(*scheme)?, "--spin-us".into(), spin_arg(spin)?];
                if *keyed {
                    a.extend(["--psk-file".into(), self.cfg.key_file.display().to_string()]);
                }
                a
            }
            Role::Raw { scheme, spin } => {
                vec!["pingpong".into(), "--serve".into(), self.bind_uri(*scheme)?, "--spin-us".into(), spin_arg(spin)?]
            }
            Role::Floor { scheme, spin } => {
                if matches!(scheme, Scheme::Tcp | Scheme::OncUdp | Scheme::OncTcp) {
                    return Err(format!(
                        "{}:// has no floor of its own (udp://, eth:// and xdp:// do)",
                        scheme.as_str()
                    ));
                }
                let bind = self.bind_uri(*scheme)?;
                ["pingpong", "--serve", "--floor", &bind, "--spin-us", &spin_arg(spin)?].map(String::from).to_vec()
            }
            Role::Workload { seconds } => {
                if !(0.01..=MAX_WORKLOAD_SECONDS).contains(seconds) {
                    return Err(format!("a workload of {seconds} s: give 0.01 to {MAX_WORKLOAD_SECONDS} s"));
                }
                vec!["workload".into(), "--seconds".into(), seconds.to_string()]
            }
        };
        if let Some(c) = self.cfg.cpu {
            args.extend(["--cpu".into(), c.to_string()]);
        }
        Ok(args)
    }

    /// A fresh address of `scheme` on the agent's side.
    fn bind_uri(&self, scheme: Scheme) -> Result<String, String> {
        if scheme.is_ethernet() {
            let iface = self.cfg.iface.as_deref().ok_or_else(|| {
                format!("this agent has no interface for {}:// (start it with --iface)", scheme.as_str())
            })?;
            return Ok(format!("{}://{iface}", scheme.as_str()));
        }
        let host = match self.cfg.host {
            IpAddr::V4(a) => a.to_string(),
            IpAddr::V6(a) => format!("[{a}]"),
        };
        Ok(format!("{}://{host}:0", scheme.as_str()))
    }

    fn spawn(&self, req: SpawnRequest) -> Result<Spawned, String> {
        // Checked first, and again when the child is filed: no child outlives a lapsed lease.
        self.renew(req.lease)?;
        let args = self.args(&req.role)?;
        let p = procs::spawn(&self.cfg.exe, &args, READY_WITHIN).map_err(|e| format!("{}: {e}", args.join(" ")))?;
        let spawned = Spawned { pid: p.pid(), uris: p.uris.clone() };
        let mut st = lock(&self.state);
        if !st.leases.contains_key(&req.lease) {
            drop(st);
            drop(p);
            return Err(format!("lease {:#x} lapsed while its child started; the child was stopped", req.lease));
        }
        st.children.insert(spawned.pid, Child { lease: req.lease, process: Arc::new(Mutex::new(Some(p))) });
        tracing::info!(pid = spawned.pid, args = args.join(" "), "started");
        Ok(spawned)
    }

    fn child(&self, lease: u64, pid: u32) -> Result<Arc<Mutex<Option<ServerProcess>>>, String> {
        match lock(&self.state).children.get(&pid) {
            Some(c) if c.lease == lease => Ok(c.process.clone()),
            _ => Err(format!("no child {pid} of lease {lease:#x}")),
        }
    }

    fn line(&self, req: LineRequest) -> Result<Option<String>, String> {
        if req.timeout_ms > MAX_LINE_WAIT_MS {
            return Err(format!("a wait of {} ms: at most {MAX_LINE_WAIT_MS} ms", req.timeout_ms));
        }
        let process = self.child(req.lease, req.pid)?;
        let p = lock(&process);
        Ok(p.as_ref().and_then(|p| p.next_line(Duration::from_millis(req.timeout_ms))))
    }

    fn stop_child(&self, req: StopRequest) -> Result<Vec<String>, String> {
        self.child(req.lease, req.pid)?;
        let Some(c) = lock(&self.state).children.remove(&req.pid) else {
            return Err(format!("child {} is already stopping", req.pid));
        };
        let p = lock(&c.process).take();
        tracing::info!(pid = req.pid, "stopping");
        Ok(p.map(|p| p.stop(STOP_WITHIN)).unwrap_or_default())
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Stops the children, each within [`STOP_WITHIN`] (its SIGTERM first, so that they stop
/// together rather than one after another).
fn stop_all(children: Vec<Child>) {
    let procs: Vec<ServerProcess> = children.into_iter().filter_map(|c| lock(&c.process).take()).collect();
    for p in &procs {
        let _ = lowlat_sys::terminate(p.pid());
    }
    for p in procs {
        p.stop(STOP_WITHIN);
    }
}

/// A procedure whose argument and result are JSON: a bad argument is `BadArgs`, a refusal the
/// agent's words.
fn json<A: DeserializeOwned, R: Serialize>(
    f: impl Fn(A) -> Result<R, String> + Send + Sync + 'static,
) -> impl Fn(&CallContext, &[u8], &mut OutBuf<'_>) -> Result<(), ProcError> + Send + Sync + 'static {
    move |_, args, out| {
        let a: A = serde_json::from_slice(if args.is_empty() { b"null" } else { args })
            .map_err(|e| ProcError::BadArgs(e.to_string()))?;
        let r = f(a).map_err(ProcError::failed)?;
        out.extend_from_slice(&serde_json::to_vec(&r).map_err(|e| ProcError::failed(e.to_string()))?);
        Ok(())
    }
}

/// The agent's program. Requests that wait (a child starting, a line, a stop) run on the
/// server's workers, so that a lease's renewal is never queued behind them.
pub fn program(agent: Arc<Agent>) -> Program {
    let a = [(); 7].map(|_| agent.clone());
    let [a1, a2, a3, a4, a5, a6, a7] = a;
    Program::new(PROGRAM, VERSION)
        .procedure(OPEN, "OPEN", json(move |()| a1.open()))
        .procedure(RENEW, "RENEW", json(move |lease: u64| a2.renew(lease)))
        .long_running(SPAWN, "SPAWN", json(move |req: SpawnRequest| a3.spawn(req)))
        .long_running(LINE, "LINE", json(move |req: LineRequest| a4.line(req)))
        .long_running(STOP, "STOP", json(move |req: StopRequest| a5.stop_child(req)))
        .long_running(CLOSE, "CLOSE", json(move |lease: u64| Ok(a6.close(lease))))
        .procedure(MACHINE, "MACHINE", json(move |()| Ok(facts::describe(a7.cfg.iface.as_deref()))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(iface: Option<&str>) -> Arc<Agent> {
        Agent::start(AgentConfig {
            exe: "/nonexistent/lowlat".into(),
            key_file: "/etc/lowlat.key".into(),
            host: "10.0.0.1".parse().unwrap(),
            iface: iface.map(String::from),
            cpu: Some(1),
            lease: Duration::from_secs(5),
        })
    }

    #[test]
    fn roles_become_this_executables_arguments() {
        let a = agent(Some("eth0"));
        let rpc = Role::Rpc { scheme: Scheme::OncTcp, spin: "0".into(), keyed: true };
        assert_eq!(
            a.args(&rpc).unwrap().join(" "),
            "serve onc+tcp://10.0.0.1:0 --spin-us 0 --psk-file /etc/lowlat.key --cpu 1"
        );
        let floor = Role::Floor { scheme: Scheme::Xdp, spin: "forever".into() };
        assert_eq!(a.args(&floor).unwrap().join(" "), "pingpong --serve --floor xdp://eth0 --spin-us forever --cpu 1");
        assert_eq!(a.args(&Role::Workload { seconds: 0.5 }).unwrap().join(" "), "workload --seconds 0.5 --cpu 1");
    }

    #[test]
    fn bad_roles_are_refused_with_reasons() {
        let a = agent(None);
        let eth = Role::Raw { scheme: Scheme::Eth, spin: "forever".into() };
        assert!(a.args(&eth).unwrap_err().contains("--iface"));
        let spin = Role::Raw { scheme: Scheme::Udp, spin: "; rm -rf /".into() };
        assert!(a.args(&spin).unwrap_err().contains("spin policy"));
        for seconds in [0.0, -1.0, f64::NAN, 61.0] {
            assert!(a.args(&Role::Workload { seconds }).unwrap_err().contains("workload"), "{seconds}");
        }
        assert!(a.args(&Role::Floor { scheme: Scheme::Tcp, spin: "0".into() }).unwrap_err().contains("no floor"));
        // Nothing starts without a lease.
        let req = SpawnRequest { lease: 7, role: Role::Workload { seconds: 1.0 } };
        assert!(a.spawn(req).unwrap_err().contains("no lease"));
    }

    #[test]
    fn leases_lapse_and_close() {
        let a = agent(None);
        let o = a.open().unwrap();
        assert_eq!(o.lease_ms, 5000);
        a.renew(o.lease).unwrap();
        a.reap(Instant::now() + Duration::from_secs(6));
        assert!(a.renew(o.lease).unwrap_err().contains("lapsed"));
        let o = a.open().unwrap();
        assert_eq!(a.close(o.lease), 0);
        assert!(a.renew(o.lease).is_err());
        assert!(a.line(LineRequest { lease: o.lease, pid: 1, timeout_ms: 10 }).unwrap_err().contains("no child"));
        assert!(a.line(LineRequest { lease: o.lease, pid: 1, timeout_ms: 1 << 40 }).unwrap_err().contains("at most"));
    }
}
