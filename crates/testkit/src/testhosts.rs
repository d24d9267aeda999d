//! Test hosts: two network namespaces joined by a veth pair, torn down whatever happens.
//!
//! Each [`TestHosts`] gets names unique to this process (the PID and a counter are in every
//! name), addresses 10.77.X.1 and 10.77.X.2/24 that exist only inside its namespaces, and two
//! layers of cleanup: `Drop` deletes the namespaces (which destroys the veth pair and any XDP
//! program on it), and a watcher process, holding the read end of a pipe whose write end only
//! this process has, deletes them when this process dies without running `Drop` (SIGINT,
//! SIGTERM, SIGKILL, abort). [`sweep_stale`] removes leftovers of dead PIDs from earlier runs.
//!
//! Code runs inside a namespace either as a child process ([`Host::command`], which is
//! `ip netns exec NS ...`) or in-process on a thread that entered the namespace with setns(2)
//! ([`Host::spawn`]); sockets opened by that thread belong to the namespace for their lifetime.

use std::io::{self, Write};
use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;

use lowlat_addr::Mac;

/// Why the test hosts could not be built or entered.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operation needs a capability the process lacks.
    #[error("{op} needs {cap}: run as root")]
    Privilege {
        /// What was refused.
        op: &'static str,
        /// The capability it needs, e.g. `"CAP_SYS_ADMIN"`.
        cap: &'static str,
    },
    /// A command the test hosts run (`ip`, ...) failed.
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        cmd: String,
        /// How it ended (exit status or signal).
        status: String,
        /// What it printed on standard error.
        stderr: String,
    },
    /// A system call failed.
    #[error("{op}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The system's error.
        source: io::Error,
    },
}

impl Error {
    fn io(op: &'static str, source: io::Error) -> Self {
        Error::Io { op, source }
    }
}

/// A result whose error is the test hosts' [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

const NS_PREFIX: &str = "lowlat-";
const IF_PREFIX: &str = "ll";

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// One end of the pair: a namespace holding one veth interface.
#[derive(Clone, Debug)]
pub struct Host {
    /// Network namespace name (`ip netns`).
    pub ns: String,
    /// The veth interface inside it.
    pub iface: String,
    /// The interface's IPv4 address: `10.77.X.1/24` in `a`, `10.77.X.2/24` in `b`.
    pub addr: Ipv4Addr,
    /// The interface's MAC.
    pub mac: Mac,
}

impl Host {
    /// `ip netns exec NS program`: a child process inside this namespace. The caller stops it.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns]).arg(program);
        c
    }

    /// Runs `f` on a new thread inside this namespace.
    pub fn spawn<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<Result<T>> {
        spawn_in_netns(&self.ns, f)
    }
}

/// The namespace between `a` and `b` when they are joined through a relay: two veth pairs,
/// `a` to [`toward_a`](Self::toward_a) and `b` to [`toward_b`](Self::toward_b), and nothing
/// joining its two ends but what runs there (a frame relay: `lowlat_relay::FrameRelay`).
#[derive(Clone, Debug)]
pub struct Between {
    /// The namespace's name.
    pub ns: String,
    /// Its end of the pair to `a`.
    pub toward_a: String,
    /// Its end of the pair to `b`.
    pub toward_b: String,
}

impl Between {
    /// Runs `f` on a new thread inside this namespace.
    pub fn spawn<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<Result<T>> {
        spawn_in_netns(&self.ns, f)
    }
}

/// How to build the pair.
#[derive(Clone, Copy, Debug)]
pub struct TestHostsConfig {
    /// MTU of both ends of the veth pair, in bytes.
    pub mtu: u32,
    /// Join `a` and `b` through a namespace [`Between`] them instead of one veth pair: no
    /// frame passes until something there relays it.
    pub relay: bool,
}

impl Default for TestHostsConfig {
    fn default() -> Self {
        TestHostsConfig { mtu: 1500, relay: false }
    }
}

/// Two namespaces `a` and `b` joined by a veth pair (or through a third, [`Between`] them);
/// deleted on drop.
#[derive(Debug)]
pub struct TestHosts {
    /// The first namespace.
    pub a: Host,
    /// The second namespace.
    pub b: Host,
    /// The relay namespace between them, when asked for ([`TestHostsConfig::relay`]).
    pub relay: Option<Between>,
    /// MTU of both ends, in bytes.
    pub mtu: u32,
    watcher: Option<(Child, ChildStdin)>,
}

/// Whether this process may create namespaces (effective UID 0), or why not.
pub fn check_root() -> Result<(), String> {
    if lowlat_sys::effective_uid() == 0 {
        Ok(())
    } else {
        Err("creating network namespaces and veth pairs needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN)".into())
    }
}

/// Whether a test may create namespaces: true as root; otherwise it prints why it is skipped
/// and returns false, or panics where `CI` is set (CI runs as root: a skip there would hide a
/// fault).
pub fn root_or_skip() -> bool {
    match check_root() {
        Ok(()) => true,
        Err(why) if std::env::var_os("CI").is_some() => panic!("CI runs as root: {why}"),
        Err(why) => {
            eprintln!("skipped: {why}");
            false
        }
    }
}

fn run(args: &[&str]) -> Result<String> {
    let out = Command::new(args[0]).args(&args[1..]).stdin(Stdio::null()).output().map_err(|e| Error::Command {
        cmd: args.join(" "),
        status: "not started".into(),
        stderr: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(Error::Command {
            cmd: args.join(" "),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl TestHosts {
    /// Creates the pair with a 1500-byte MTU.
    pub fn new() -> Result<TestHosts> {
        Self::with_config(TestHostsConfig::default())
    }

    /// Creates the pair as `cfg` says, with names unique to this process (stale pairs of dead
    /// processes are removed first). Needs root ([`Error::Privilege`] otherwise).
    pub fn with_config(cfg: TestHostsConfig) -> Result<TestHosts> {
        check_root().map_err(|_| Error::Privilege { op: "creating test namespaces", cap: "root" })?;
        sweep_stale();
        let pid = std::process::id();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed) % 10_000;
        let ns_a = format!("{NS_PREFIX}{pid}-{n}-a");
        let ns_b = format!("{NS_PREFIX}{pid}-{n}-b");
        let if_a = format!("{IF_PREFIX}{pid}x{n}a");
        let if_b = format!("{IF_PREFIX}{pid}x{n}b");
        debug_assert!(if_a.len() < libc::IFNAMSIZ);
        let net = (n % 250) as u8;
        let addr_a = Ipv4Addr::new(10, 77, net, 1);
        let addr_b = Ipv4Addr::new(10, 77, net, 2);

        let relay = cfg.relay.then(|| Between {
            ns: format!("{NS_PREFIX}{pid}-{n}-r"),
            toward_a: format!("{IF_PREFIX}{pid}x{n}c"),
            toward_b: format!("{IF_PREFIX}{pid}x{n}d"),
        });

        // The watcher exists before anything it must remove.
        let mut namespaces = vec![ns_a.as_str(), ns_b.as_str()];
        namespaces.extend(relay.as_ref().map(|r| r.ns.as_str()));
        let watcher = spawn_watcher(&namespaces)?;
        let mut hosts = TestHosts {
            a: Host { ns: ns_a, iface: if_a, addr: addr_a, mac: Mac::default() },
            b: Host { ns: ns_b, iface: if_b, addr: addr_b, mac: Mac::default() },
            relay,
            mtu: cfg.mtu,
            watcher: Some(watcher),
        };
        hosts.build(cfg)?;
        Ok(hosts)
    }

    fn build(&mut self, cfg: TestHostsConfig) -> Result<()> {
        let mtu = cfg.mtu.to_string();
        run(&["ip", "netns", "add", &self.a.ns])?;
        run(&["ip", "netns", "add", &self.b.ns])?;
        match &self.relay {
            None => add_veth((&self.a.iface, &self.a.ns), (&self.b.iface, &self.b.ns), &mtu)?,
            Some(r) => {
                run(&["ip", "netns", "add", &r.ns])?;
                add_veth((&self.a.iface, &self.a.ns), (&r.toward_a, &r.ns), &mtu)?;
                add_veth((&self.b.iface, &self.b.ns), (&r.toward_b, &r.ns), &mtu)?;
                let ns = r.ns.clone();
                spawn_in_netns(&ns, disable_ipv6)
                    .join()
                    .map_err(|_| Error::io("configuring a test namespace", io::Error::other("thread panicked")))???;
                for iface in ["lo", &r.toward_a, &r.toward_b] {
                    run(&["ip", "-n", &r.ns, "link", "set", "dev", iface, "up"])?;
                }
            }
        }
        for h in [&mut self.a, &mut self.b] {
            let ns = h.ns.clone();
            let iface = h.iface.clone();
            let addr = format!("{}/24", h.addr);
            let info = spawn_in_netns(&ns, move || -> Result<lowlat_sys::Interface> {
                disable_ipv6()?;
                lowlat_sys::interface(&iface).map_err(|e| Error::io("reading a test interface", e))
            })
            .join()
            .map_err(|_| Error::io("configuring a test namespace", io::Error::other("thread panicked")))???;
            h.mac = Mac(info.mac);
            run(&["ip", "-n", &h.ns, "addr", "add", &addr, "dev", &h.iface])?;
            run(&["ip", "-n", &h.ns, "link", "set", "dev", "lo", "up"])?;
            run(&["ip", "-n", &h.ns, "link", "set", "dev", &h.iface, "up"])?;
        }
        Ok(())
    }

    /// Whether a namespace still exists (for tests of the cleanup).
    pub fn exists(ns: &str) -> bool {
        std::path::Path::new("/run/netns").join(ns).exists()
    }
}

/// IPv6 would add router solicitations and MLD reports to every capture: switched off in the
/// calling thread's namespace.
fn disable_ipv6() -> Result<()> {
    for f in ["all", "default"] {
        std::fs::write(format!("/proc/sys/net/ipv6/conf/{f}/disable_ipv6"), "1")
            .map_err(|e| Error::io("disabling IPv6 in a test namespace", e))?;
    }
    Ok(())
}

/// A veth pair whose ends are created directly inside their namespaces: the pair never exists in
/// the root namespace.
fn add_veth((if1, ns1): (&str, &str), (if2, ns2): (&str, &str), mtu: &str) -> Result<()> {
    let end = |name, ns| [name, "netns", ns, "mtu", mtu, "numtxqueues", "1", "numrxqueues", "1"];
    let mut args = vec!["ip", "link", "add"];
    args.extend(end(if1, ns1));
    args.extend(["type", "veth", "peer", "name"]);
    args.extend(end(if2, ns2));
    run(&args).map(|_| ())
}

impl Drop for TestHosts {
    fn drop(&mut self) {
        for ns in [Some(&self.a.ns), Some(&self.b.ns), self.relay.as_ref().map(|r| &r.ns)].into_iter().flatten() {
            // Deleting the namespace destroys its veth end, the peer with it, and any XDP
            // program attached to either.
            let _ = run(&["ip", "netns", "del", ns]);
        }
        if let Some((mut child, stdin)) = self.watcher.take() {
            // Nothing left for it to do: stop it by its PID (a child not yet waited for, so the
            // PID cannot have been reused), then reap it.
            let _ = lowlat_sys::kill(child.id());
            drop(stdin);
            let _ = child.wait();
        }
    }
}

fn spawn_watcher(namespaces: &[&str]) -> Result<(Child, ChildStdin)> {
    let mut script = String::from("trap '' INT TERM HUP; read _; ");
    for ns in namespaces {
        script.push_str(&format!("ip netns del {ns} 2>/dev/null; "));
    }
    let mut child = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own process group: a Ctrl-C aimed at the test run must not kill it first.
        .process_group(0)
        .spawn()
        .map_err(|e| Error::io("starting the test-hosts watcher (sh)", e))?;
    let mut stdin = child.stdin.take().expect("stdin was piped");
    // Nothing is written until exit; a zero-length write checks the pipe is open.
    let _ = stdin.write(&[]);
    Ok((child, stdin))
}

/// Parses `lowlat-PID-N-a` (`-b`, `-r`) / `llPIDxNa` (`b`, `c`, `d`) names; returns the PID.
fn owner_pid(name: &str) -> Option<u32> {
    if let Some(rest) = name.strip_prefix(NS_PREFIX) {
        let mut it = rest.split('-');
        let pid = it.next()?.parse().ok()?;
        it.next()?.parse::<u32>().ok()?;
        return matches!(it.next(), Some("a" | "b" | "r")).then_some(pid).filter(|_| it.next().is_none());
    }
    let rest = name.strip_prefix(IF_PREFIX)?;
    let (pid, tail) = rest.split_once('x')?;
    let n = tail.strip_suffix(['a', 'b', 'c', 'd'])?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

fn pid_alive(pid: u32) -> bool {
    std::path::Path::new("/proc").join(pid.to_string()).exists()
}

/// Removes namespaces and interfaces left behind by earlier runs whose process is gone.
/// Returns the names removed. Best effort: failures are skipped.
pub fn sweep_stale() -> Vec<String> {
    let mut removed = Vec::new();
    if let Ok(list) = std::fs::read_dir("/run/netns") {
        for e in list.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = owner_pid(&name) {
                if !pid_alive(pid) && run(&["ip", "netns", "del", &name]).is_ok() {
                    removed.push(name);
                }
            }
        }
    }
    // Only if a run died between creating a pair and moving it could ends sit in the root
    // namespace; our pairs are created inside their namespaces, so this is belt and braces.
    if let Ok(list) = std::fs::read_dir("/sys/class/net") {
        for e in list.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = owner_pid(&name) {
                if !pid_alive(pid) && run(&["ip", "link", "del", &name]).is_ok() {
                    removed.push(name);
                }
            }
        }
    }
    removed
}

/// Moves the calling thread into network namespace `ns` (by `ip netns` name).
pub fn enter_netns(ns: &str) -> Result<()> {
    lowlat_sys::enter_netns(&std::path::Path::new("/run/netns").join(ns)).map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM) => Error::Privilege { op: "entering a network namespace", cap: "CAP_SYS_ADMIN" },
        _ => Error::io("entering the network namespace", e),
    })
}

/// Runs `f` on a new thread that first enters network namespace `ns`.
pub fn spawn_in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<Result<T>> {
    let ns = ns.to_string();
    std::thread::Builder::new()
        .name(format!("netns {ns}"))
        .spawn(move || {
            enter_netns(&ns)?;
            Ok(f())
        })
        .expect("spawning a thread")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_encode_the_pid() {
        assert_eq!(owner_pid("lowlat-1234-7-a"), Some(1234));
        assert_eq!(owner_pid("lowlat-1234-7-b"), Some(1234));
        assert_eq!(owner_pid("ll1234x7b"), Some(1234));
        assert_eq!(owner_pid("lowlat-1234-7-r"), Some(1234));
        assert_eq!(owner_pid("ll1234x7d"), Some(1234));
        for other in ["lowlat-sh-a", "lowlat-1-2-c", "lowlat-1-2-a-x", "ll12x", "eth0", "llx1a", "ll1x1e"] {
            assert_eq!(owner_pid(other), None, "{other}");
        }
    }
}
