//! A client over several servers: the endpoints of one URI argument (`udp://10.0.0.1:7000,
//! 10.0.0.2:7000`, an element without a scheme taking the previous one's), and every address
//! the system resolver gives a host name (`/etc/hosts`, DNS), each a member: an ordinary
//! single-server [`Client`] of its own.
//!
//! **Which server.** Each call goes to the member with the fewest calls outstanding; among
//! equals, the one this thread called last. Fewest outstanding rather than round robin because
//! a server that slows down (overloaded, paging, on a busy host) keeps its calls longer and so
//! is given fewer new ones, where round robin would keep sending it its share. Ties stay with
//! the thread's last server because an idle server's serving thread stops spinning and sleeps:
//! round robin over idle servers made every call of a lone caller pay a wake-up (measured: a
//! shared-memory null call's p50 went from 0.3-0.6 µs to 20 µs, `docs/measurements.md`), while
//! calls from several threads, each keeping the others' servers busy, still spread. Picking
//! reads one counter per member and writes the chosen member's (an atomic add on its own cache
//! line, and one back when the call ends): no lock, no allocation; the clock is read only while
//! a member is down.
//!
//! **Left out, tried again.** A member that fails in a way that is the server's (not running,
//! refusing the bind — too many sessions, key, version —, `Busy`, connection lost, restarted;
//! not a call that timed out, whose deadline may be the caller's tight one) is left out until a
//! back-off passes: 10 ms, doubled each time it fails again, at
//! most [`MAX_BACKOFF`] (so a server that comes back has calls again within half a second).
//! When it has passed, one calling thread at a time sends the member a call (the probe; others
//! keep leaving it out); the member's own client binds again before encoding that call if the
//! server lost its session, so a server still down refuses the probe before anything was sent.
//! A member not reachable at `connect` is connected the same way, by its first probe.
//!
//! **At most once across servers.** A call that certainly did not run on one member (refused at
//! bind, no route, server not running, `Busy`, lost before it was sent:
//! [`Error::may_have_executed`] false) is sent to the next member. A call that may have run is
//! sent to another only when marked idempotent (per call, [`CallOptions::idempotent`]; per
//! procedure, [`Client::idempotent`]). Each member is tried at most once per call, each try
//! within the call's deadline. To send the call again the arguments must still exist: with
//! several members they are encoded once into a per-thread buffer and copied into the member's
//! (one copy of the arguments per call, kept on the thread so nothing is allocated once it has
//! grown); a single-server client writes them in place as before. An async call does the same
//! as a future (`super::spread_async`).
//!
//! [`CallOptions::idempotent`]: crate::CallOptions::idempotent

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use lowlat_codec::OutBuf;
use lowlat_proto::{ByteOrder, Session};

use super::Client;
use crate::stats::ClientStats;
use crate::{CallSite, ClientConfig, Endpoint, Error};

/// The first back-off of a member found down.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(10);
/// The longest a member is left out before it is tried again.
pub const MAX_BACKOFF: Duration = Duration::from_millis(500);
/// Members one client may have (each call's tried members are a 64-bit mask).
pub const MAX_MEMBERS: usize = 64;

/// What a client knows of one of its servers ([`Client::server_stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// The server's endpoint (one address of a host name that has several).
    pub uri: String,
    /// Whether calls go to it now (false while it is left out, or never reached).
    pub up: bool,
    /// Calls outstanding on it now.
    pub outstanding: u32,
    /// Calls sent to it (probes included).
    pub calls: u64,
    /// Of those, the ones that failed certainly not executed (refused, not running, `Busy`, ...).
    pub refused: u64,
    /// Of those, the ones that failed and may have executed.
    pub failed_maybe_executed: u64,
    /// Calls it refused that then went to another server.
    pub moved: u64,
    /// Times it was left out.
    pub left_out: u64,
    /// What it last said when it failed.
    pub last_error: Option<String>,
    /// Its binding's own counters (binds, retransmissions, ...).
    pub client: ClientStats,
}

/// The endpoints `uri` names: one element per comma, each host name with several addresses one
/// member per address (resolved with `resolve`, the system resolver in [`Client::connect`]).
/// A name with one address, or one the resolver does not know, stays as written (so that errors
/// name it as the user wrote it, and an unknown name fails where it always did).
pub(crate) fn expand(
    uri: &str,
    resolve: impl Fn(&str, u16) -> Vec<std::net::SocketAddr>,
) -> Result<Vec<String>, Error> {
    let mut out: Vec<String> = Vec::new();
    let mut scheme = "";
    let mut onc = None;
    for part in uri.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(Error::InvalidUri { uri: uri.into(), reason: "an empty endpoint between commas".into() });
        }
        let full = match part.split_once("://") {
            Some((s, _)) => {
                scheme = s;
                part.to_string()
            }
            None if !scheme.is_empty() => format!("{scheme}://{part}"),
            None => part.to_string(), // fails to parse below, with the parser's reason
        };
        let endpoint: Endpoint = full.parse()?;
        let is_onc = matches!(endpoint, Endpoint::OncUdp { .. } | Endpoint::OncTcp { .. });
        if *onc.get_or_insert(is_onc) != is_onc {
            return Err(Error::InvalidUri {
                uri: uri.into(),
                reason: "ONC RPC and lowlat's protocol cannot be mixed in one client".into(),
            });
        }
        let (host, port, keep_port) = match &endpoint {
            Endpoint::Udp { host_port } | Endpoint::Tcp { host_port } => {
                let (h, p) = host_port.rsplit_once(':').unwrap_or((host_port, "0"));
                (h.to_string(), p.parse().unwrap_or(0), true)
            }
            Endpoint::OncUdp { host, port } | Endpoint::OncTcp { host, port } => {
                (host.clone(), port.unwrap_or(111), port.is_some())
            }
            _ => {
                out.push(full);
                continue;
            }
        };
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if bare.parse::<std::net::IpAddr>().is_ok() {
            out.push(full);
            continue;
        }
        let mut addrs = resolve(bare, port);
        let mut seen = Vec::new();
        addrs.retain(|a| {
            let new = !seen.contains(a);
            seen.push(*a);
            new
        });
        if addrs.len() <= 1 {
            out.push(full);
            continue;
        }
        let scheme = endpoint.scheme();
        for a in addrs {
            // Without a port, each host's rpcbind is asked where the program is.
            out.push(match (keep_port, a.ip()) {
                (true, _) => format!("{scheme}://{a}"),
                (false, std::net::IpAddr::V6(ip)) => format!("{scheme}://[{ip}]"),
                (false, std::net::IpAddr::V4(ip)) => format!("{scheme}://{ip}"),
            });
        }
    }
    if out.len() > MAX_MEMBERS {
        return Err(Error::InvalidUri {
            uri: uri.into(),
            reason: format!("{} endpoints; one client takes at most {MAX_MEMBERS}", out.len()),
        });
    }
    Ok(out)
}

/// The system resolver's addresses for `host` (none when it does not know the name).
pub(crate) fn system_resolve(host: &str, port: u16) -> Vec<std::net::SocketAddr> {
    use std::net::ToSocketAddrs;
    (host, port).to_socket_addrs().map(|a| a.collect()).unwrap_or_default()
}

/// One server of a [`Spread`]. Aligned to its own cache lines: its counters are written by
/// every thread that calls it, and must not share a line with another member's.
#[repr(align(128))]
struct Member {
    uri: Arc<str>,
    /// Set once, at `connect` or by the first probe that reaches the server; the client binds
    /// again by itself when the server loses its session.
    client: OnceLock<Client>,
    outstanding: AtomicU32,
    calls: AtomicU64,
    /// Nanoseconds since [`Spread::born`] until which the member is left out; 0 while it is up.
    down_until: AtomicU64,
    /// The current back-off in nanoseconds (0 while up).
    backoff: AtomicU64,
    /// A caller is sending the probe.
    probing: AtomicBool,
    refused: AtomicU64,
    failed_maybe_executed: AtomicU64,
    moved: AtomicU64,
    left_out: AtomicU64,
    /// Written only on failures.
    last_error: Mutex<Option<String>>,
}

/// The members' body byte order, once one has bound: 0 unknown, 1 little, 2 big.
fn order_code(o: ByteOrder) -> u8 {
    match o {
        ByteOrder::Little => 1,
        ByteOrder::Big => 2,
    }
}

/// A client over several servers ([module docs](self)).
pub(crate) struct Spread {
    uri: Arc<str>,
    program: u32,
    version: u32,
    cfg: ClientConfig,
    members: Box<[Member]>,
    born: Instant,
    /// Every member must send bodies in one byte order, since generated stubs encode the
    /// arguments before the member is known.
    order: AtomicU8,
    /// Members left out now: while there is one, each pick looks for a probe to send first.
    down: AtomicU32,
}

impl std::fmt::Debug for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("uri", &self.uri)
            .field("program", &self.program)
            .field("version", &self.version)
            .field("servers", &self.members.len())
            .finish()
    }
}

thread_local! {
    /// The member this thread called last, where its scan starts (ties stay there).
    static LAST: Cell<usize> = const { Cell::new(0) };
    /// The arguments of this thread's call, encoded once so that a member that refused it can
    /// be replaced by another. Taken out during a call (a call made from inside `encode` gets
    /// a fresh one instead of a panic).
    static ARGS: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Why a call went no further: what each server said.
fn listing(tried: &[(Arc<str>, String)]) -> String {
    tried.iter().map(|(uri, what)| format!("{uri}: {what}")).collect::<Vec<_>>().join("; ")
}

/// Whether `e` says something about the server (so it is left out for a while) rather than
/// about the call (bad arguments, a procedure that failed: the same on any server). A call that
/// timed out is not: its deadline may be the caller's tight one, and a server that is slow
/// keeps calls outstanding longer, so it is picked less already.
pub(super) fn is_the_servers(e: &Error) -> bool {
    matches!(
        e,
        Error::ServerNotRunning { .. }
            | Error::UnknownProgram { .. }
            | Error::VersionMismatch { .. }
            | Error::ProtocolMismatch { .. }
            | Error::TooManySessions { .. }
            | Error::SourceLimit { .. }
            | Error::KeyMismatch { .. }
            | Error::UnauthenticatedRefusal { .. }
            | Error::Encryption { .. }
            | Error::BindRefused { .. }
            | Error::BindTimeout { .. }
            | Error::Busy { .. }
            | Error::ConnectionLost { .. }
            | Error::ServerRestarted { .. }
            | Error::SessionLost { .. }
            | Error::Io { .. }
            | Error::RpcMismatch { .. }
            | Error::NotRegistered { .. }
            | Error::MalformedReply { .. }
    )
}

/// A member picked for one call: its outstanding count is given back on drop.
pub(crate) struct Picked<'a> {
    spread: &'a Spread,
    index: usize,
    probe: bool,
}

impl Drop for Picked<'_> {
    fn drop(&mut self) {
        let m = &self.spread.members[self.index];
        m.outstanding.fetch_sub(1, Ordering::Relaxed);
        if self.probe {
            m.probing.store(false, Ordering::Release);
        }
    }
}

impl<'a> Picked<'a> {
    /// Which member it is.
    pub(super) fn index(&self) -> usize {
        self.index
    }

    /// After the call: a success brings a left-out member back; a server's failure leaves it
    /// out.
    #[inline]
    pub(crate) fn outcome<R>(&self, r: &Result<R, Error>) {
        match r {
            Ok(_) => {
                let m = &self.spread.members[self.index];
                // A load, not a store, on the common path: the line stays shared.
                if m.backoff.load(Ordering::Relaxed) != 0 {
                    self.spread.mark_up(self.index);
                }
            }
            Err(e) => self.spread.failed(self.index, self.probe, e, false),
        }
    }
}

impl Spread {
    /// Connects to every member at once (each bind in a thread of its own, so that an
    /// unreachable one costs its bind timeout once, not once per member). Fails only when none
    /// answers; the others are left out and connected by a later probe.
    pub(crate) fn connect(
        uri: &str,
        members: Vec<String>,
        program: u32,
        version: u32,
        cfg: ClientConfig,
    ) -> Result<Spread, Error> {
        let connected: Vec<Result<Client, Error>> = std::thread::scope(|s| {
            let handles: Vec<_> = members
                .iter()
                .map(|m| {
                    let cfg = cfg.clone();
                    s.spawn(move || Client::connect_single(m, program, version, cfg))
                })
                .collect();
            handles
                .into_iter()
                .zip(&members)
                .map(|(h, m)| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::BindRefused { uri: m.clone(), reason: "connecting panicked".into() })
                    })
                })
                .collect()
        });
        let spread = Spread {
            uri: uri.into(),
            program,
            version,
            cfg,
            members: members
                .iter()
                .map(|m| Member {
                    uri: m.as_str().into(),
                    client: OnceLock::new(),
                    outstanding: AtomicU32::new(0),
                    calls: AtomicU64::new(0),
                    down_until: AtomicU64::new(0),
                    backoff: AtomicU64::new(0),
                    probing: AtomicBool::new(false),
                    refused: AtomicU64::new(0),
                    failed_maybe_executed: AtomicU64::new(0),
                    moved: AtomicU64::new(0),
                    left_out: AtomicU64::new(0),
                    last_error: Mutex::new(None),
                })
                .collect(),
            born: Instant::now(),
            order: AtomicU8::new(0),
            down: AtomicU32::new(0),
        };
        let mut errors = Vec::new();
        let mut answered = None;
        for (i, c) in connected.into_iter().enumerate() {
            match c.and_then(|c| spread.admit(i, c)) {
                Ok(()) => {}
                Err(e) => {
                    errors.push((spread.members[i].uri.clone(), e.to_string()));
                    spread.failed(i, true, &e, true);
                    let silent =
                        matches!(e, Error::ServerNotRunning { .. } | Error::BindTimeout { .. } | Error::Io { .. });
                    if !silent && answered.is_none() {
                        answered = Some(e);
                    }
                }
            }
        }
        if errors.len() == spread.members.len() {
            // A server that answered and refused (unknown program, key, version) says more
            // than a list of refusals: its error, as a single-server client would have it.
            return Err(answered.unwrap_or_else(|| Error::NoServer { uri: uri.into(), servers: listing(&errors) }));
        }
        Ok(spread)
    }

    /// Makes `client` member `i`'s, if its byte order is the other members'.
    fn admit(&self, i: usize, client: Client) -> Result<(), Error> {
        let code = order_code(client.server_byte_order());
        match self.order.compare_exchange(0, code, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {}
            Err(agreed) if agreed == code => {}
            Err(_) => {
                return Err(Error::BindRefused {
                    uri: self.members[i].uri.to_string(),
                    reason: "the server sends bodies in another byte order than this client's other servers".into(),
                })
            }
        }
        // A probe that lost a race with another keeps the first client.
        let _ = self.members[i].client.set(client);
        Ok(())
    }

    fn now_ns(&self) -> u64 {
        // Never 0, which means "up".
        self.born.elapsed().as_nanos() as u64 + 1
    }

    fn mark_up(&self, i: usize) {
        let m = &self.members[i];
        m.backoff.store(0, Ordering::Relaxed);
        if m.down_until.swap(0, Ordering::AcqRel) != 0 {
            self.down.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Member `i` failed with `e`: counted and, when the failure is the server's (or, with
    /// `connecting`, whatever it is: a member that cannot be connected takes no calls), left
    /// out. Only a failed probe (or connect) lengthens the back-off: the calls that were in
    /// flight when a server went all fail, and must not push its return further away.
    #[cold]
    #[inline(never)]
    fn failed(&self, i: usize, probe: bool, e: &Error, connecting: bool) {
        let m = &self.members[i];
        if e.may_have_executed() {
            m.failed_maybe_executed.fetch_add(1, Ordering::Relaxed);
        } else {
            m.refused.fetch_add(1, Ordering::Relaxed);
        }
        if !connecting && !is_the_servers(e) {
            return;
        }
        *m.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
        let first = FIRST_BACKOFF.as_nanos() as u64;
        let backoff = match m.backoff.load(Ordering::Relaxed) {
            0 => first,
            b if probe => (b * 2).min(MAX_BACKOFF.as_nanos() as u64),
            _ if m.down_until.load(Ordering::Relaxed) != 0 => return, // already left out
            b => b,
        };
        m.backoff.store(backoff, Ordering::Relaxed);
        if m.down_until.swap(self.now_ns() + backoff, Ordering::AcqRel) == 0 {
            self.down.fetch_add(1, Ordering::Relaxed);
        }
        m.left_out.fetch_add(1, Ordering::Relaxed);
    }

    /// The member for the next call, skipping those in `tried` (a bit per member): a left-out
    /// member whose back-off has passed and that no other caller is probing (the probe goes
    /// first: a server back should have calls again at once), else the up member with the
    /// fewest calls outstanding, ties going to the one this thread called last.
    #[inline]
    pub(crate) fn pick(&self, tried: u64) -> Option<Picked<'_>> {
        if self.down.load(Ordering::Relaxed) != 0 {
            if let Some(p) = self.probe_due(tried) {
                return Some(p);
            }
        }
        let n = self.members.len();
        let mut i = LAST.with(Cell::get);
        if i >= n {
            i = 0;
        }
        let mut best = usize::MAX;
        let mut best_load = u32::MAX;
        for _ in 0..n {
            let m = &self.members[i];
            if tried & (1 << i) == 0 && m.down_until.load(Ordering::Acquire) == 0 {
                let load = m.outstanding.load(Ordering::Relaxed);
                if load < best_load {
                    best = i;
                    best_load = load;
                    if load == 0 {
                        break;
                    }
                }
            }
            i += 1;
            if i == n {
                i = 0;
            }
        }
        if best == usize::MAX {
            return None;
        }
        LAST.with(|l| l.set(best));
        Some(self.take(best, false))
    }

    /// A left-out member whose back-off has passed, claimed for a probe.
    #[cold]
    #[inline(never)]
    fn probe_due(&self, tried: u64) -> Option<Picked<'_>> {
        let now = self.now_ns();
        let due = |(i, m): &(usize, &Member)| {
            let until = m.down_until.load(Ordering::Acquire);
            tried & (1 << i) == 0 && until != 0 && now >= until && !m.probing.swap(true, Ordering::AcqRel)
        };
        let (i, _) = self.members.iter().enumerate().find(due)?;
        Some(self.take(i, true))
    }

    fn take(&self, i: usize, probe: bool) -> Picked<'_> {
        let m = &self.members[i];
        m.outstanding.fetch_add(1, Ordering::Relaxed);
        m.calls.fetch_add(1, Ordering::Relaxed);
        Picked { spread: self, index: i, probe }
    }

    /// Member `picked`'s client, connecting it first if it never was (a probe's work). A member
    /// that cannot be connected is left out, and what it said is added to `said` (nothing was
    /// sent: the call goes to the next).
    pub(super) fn member_client(&self, picked: &Picked<'_>, said: &mut Vec<(Arc<str>, String)>) -> Option<&Client> {
        let m = &self.members[picked.index];
        if let Some(c) = m.client.get() {
            return Some(c);
        }
        self.connect_member(picked).map_err(|e| self.moved_on(picked, &e, said)).ok()
    }

    #[cold]
    #[inline(never)]
    fn connect_member(&self, picked: &Picked<'_>) -> Result<&Client, Error> {
        let m = &self.members[picked.index];
        let connected = Client::connect_single(&m.uri, self.program, self.version, self.cfg.clone())
            .and_then(|c| self.admit(picked.index, c))
            .and_then(|()| {
                m.client
                    .get()
                    .ok_or_else(|| Error::BindRefused { uri: m.uri.to_string(), reason: "not connected".into() })
            });
        if let Err(e) = &connected {
            self.failed(picked.index, picked.probe, e, true);
        }
        connected
    }

    /// Member `picked` refused the call with `e` (or could not be connected): the call moves
    /// on to the next, and `said` keeps what it said.
    #[cold]
    #[inline(never)]
    pub(super) fn moved_on(&self, picked: &Picked<'_>, e: &Error, said: &mut Vec<(Arc<str>, String)>) {
        let m = &self.members[picked.index];
        m.moved.fetch_add(1, Ordering::Relaxed);
        said.push((m.uri.clone(), e.to_string()));
    }

    /// One call: over the picked member, and over the next one while a member refuses a call
    /// that did not run (or that may have run, for an idempotent call).
    pub(crate) fn call<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        proc_no: u32,
        timeout: Option<Duration>,
        idempotent: &[u32],
        encode: impl FnOnce(&mut OutBuf<'_>) -> Result<(), E>,
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        let mut args = ARGS.take();
        args.clear();
        let encoded = encode(&mut OutBuf::from(&mut args));
        let r = match encoded {
            Err(e) => Err(Error::Encode { call: self.site(proc_no), source: Box::new(e) }),
            Ok(()) => self.send(proc_no, timeout, idempotent, &args, decode),
        };
        ARGS.set(args);
        r
    }

    fn send<R, E: std::error::Error + Send + Sync + 'static>(
        &self,
        proc_no: u32,
        timeout: Option<Duration>,
        idempotent: &[u32],
        args: &[u8],
        decode: impl FnOnce(&[u8]) -> Result<R, E>,
    ) -> Result<R, Error> {
        let mut decode = Some(decode);
        let mut tried = 0u64;
        let mut said: Vec<(Arc<str>, String)> = Vec::new();
        while let Some(picked) = self.pick(tried) {
            tried |= 1 << picked.index;
            let Some(client) = self.member_client(&picked, &mut said) else { continue };
            let r = client.call_leaf(
                proc_no,
                timeout,
                |buf| {
                    buf.extend_from_slice(args);
                    Ok(())
                },
                // Only a reply is decoded, and a reply ends the call: `decode` is still here.
                |body| (decode.take().expect("decoded at most once"))(body),
            );
            picked.outcome(&r);
            match r {
                Err(e) if is_the_servers(&e) => {
                    if e.may_have_executed() && !idempotent.contains(&proc_no) {
                        return Err(e);
                    }
                    self.moved_on(&picked, &e, &mut said);
                    if decode.is_none() {
                        return Err(e);
                    }
                }
                r => return r,
            }
        }
        Err(self.no_server(said))
    }

    /// Every member refused the call or is left out: what each said.
    #[cold]
    #[inline(never)]
    pub(super) fn no_server(&self, mut said: Vec<(Arc<str>, String)>) -> Error {
        for m in self.members.iter() {
            if said.iter().any(|(u, _)| *u == m.uri) {
                continue;
            }
            let last = m.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let what = match last {
                Some(e) => format!("left out after: {e}"),
                None => "being tried by another call".into(),
            };
            said.push((m.uri.clone(), what));
        }
        Error::NoServer { uri: self.uri.to_string(), servers: listing(&said) }
    }

    /// A spread whose member is a spread: never made (members are single servers).
    #[cold]
    pub(crate) fn nested(&self) -> Error {
        Error::InvalidUri { uri: self.uri.to_string(), reason: "a server list within a server list".into() }
    }

    pub(crate) fn site(&self, proc_no: u32) -> CallSite {
        CallSite { uri: self.uri.clone(), program: self.program, version: self.version, proc_no, name: None }
    }

    pub(crate) fn uri(&self) -> &str {
        &self.uri
    }

    /// Any connected member's client (the first), for what every member shares.
    fn any(&self) -> Option<&Client> {
        self.members.iter().find_map(|m| m.client.get())
    }

    pub(crate) fn server_order(&self) -> ByteOrder {
        match self.order.load(Ordering::Relaxed) {
            2 => ByteOrder::Big,
            _ => ByteOrder::Little,
        }
    }

    pub(crate) fn session(&self) -> Session {
        self.any().map(Client::session).unwrap_or_else(|| Session {
            token: 0,
            slots: 0,
            window: 1,
            server_order: self.server_order(),
            max_message: self.cfg.max_message as u32,
            max_frame: 0,
            generation: 0,
            reliable: false,
            keyed: false,
            sealed: false,
        })
    }

    pub(crate) fn is_onc(&self) -> bool {
        self.any().is_some_and(Client::is_onc)
    }

    pub(crate) fn stats(&self) -> ClientStats {
        self.members.iter().filter_map(|m| m.client.get()).fold(ClientStats::default(), |t, c| t.plus(&c.stats()))
    }

    pub(crate) fn server_stats(&self) -> Vec<ServerStats> {
        self.members
            .iter()
            .map(|m| ServerStats {
                uri: m.uri.to_string(),
                up: m.client.get().is_some() && m.down_until.load(Ordering::Relaxed) == 0,
                outstanding: m.outstanding.load(Ordering::Relaxed),
                calls: m.calls.load(Ordering::Relaxed),
                refused: m.refused.load(Ordering::Relaxed),
                failed_maybe_executed: m.failed_maybe_executed.load(Ordering::Relaxed),
                moved: m.moved.load(Ordering::Relaxed),
                left_out: m.left_out.load(Ordering::Relaxed),
                last_error: m.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                client: m.client.get().map(Client::stats).unwrap_or_default(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn fake(host: &str, port: u16) -> Vec<SocketAddr> {
        match host {
            "two.example" => vec![
                SocketAddr::from(([10, 0, 0, 1], port)),
                SocketAddr::from(([10, 0, 0, 2], port)),
                SocketAddr::from(([10, 0, 0, 1], port)),
            ],
            "v6.example" => vec![format!("[::1]:{port}").parse().unwrap(), SocketAddr::from(([127, 0, 0, 1], port))],
            "one.example" => vec![SocketAddr::from(([10, 0, 0, 9], port))],
            _ => vec![],
        }
    }

    #[test]
    fn commas_and_host_names_with_several_addresses_make_members() {
        let got = expand("udp://127.0.0.1:7000,127.0.0.1:7001, tcp://two.example:80", fake).unwrap();
        assert_eq!(got, ["udp://127.0.0.1:7000", "udp://127.0.0.1:7001", "tcp://10.0.0.1:80", "tcp://10.0.0.2:80"]);
        // One address, or a name the resolver does not know: as written.
        assert_eq!(expand("udp://one.example:7", fake).unwrap(), ["udp://one.example:7"]);
        assert_eq!(expand("udp://nowhere.example:7", fake).unwrap(), ["udp://nowhere.example:7"]);
        // ONC RPC without a port: each address's rpcbind is asked.
        assert_eq!(expand("onc+udp://v6.example", fake).unwrap(), ["onc+udp://[::1]", "onc+udp://127.0.0.1"]);
        assert_eq!(
            expand("onc+tcp://two.example:2049", fake).unwrap(),
            ["onc+tcp://10.0.0.1:2049", "onc+tcp://10.0.0.2:2049"]
        );
        assert_eq!(expand("shm:///tmp/a,/tmp/b", fake).unwrap(), ["shm:///tmp/a", "shm:///tmp/b"]);
    }

    #[test]
    fn bad_lists_are_refused_saying_why() {
        let e = expand("udp://127.0.0.1:7000,,udp://127.0.0.1:7001", fake).unwrap_err();
        assert!(e.to_string().contains("empty endpoint"), "{e}");
        let e = expand("udp://127.0.0.1:7000,onc+udp://127.0.0.1", fake).unwrap_err();
        assert!(e.to_string().contains("cannot be mixed"), "{e}");
        let e = expand("127.0.0.1:7000", fake).unwrap_err();
        assert!(matches!(e, Error::InvalidUri { .. }), "{e}");
        let many = (0..65).map(|i| format!("udp://127.0.0.1:{}", 7000 + i)).collect::<Vec<_>>().join(",");
        assert!(expand(&many, fake).unwrap_err().to_string().contains("at most 64"));
    }
}
