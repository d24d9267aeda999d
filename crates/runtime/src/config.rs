//! Client and server settings, with the defaults a person would choose without measuring.

use std::time::Duration;

use lowlat_proto::Psk;
use lowlat_transport::Cidr;
use lowlat_wait::SpinPolicy;

/// How a client binds and calls.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Spin budget before blocking while waiting for a result.
    pub spin: SpinPolicy,
    /// Call slots wanted: how many calls may be outstanding at once (threads beyond this wait).
    pub slots: u16,
    /// Deadline of a call, unless given per call.
    pub deadline: Duration,
    /// How long binding may take.
    pub bind_timeout: Duration,
    /// Largest argument or result message.
    pub max_message: usize,
    /// Fragments in flight for large messages (at most 64).
    pub window: u16,
    /// Retransmission and acknowledgement timers.
    pub engine: lowlat_proto::ClientEngineConfig,
    /// Note the moments of each call for accounting (`crate::trace`); off costs one branch.
    pub trace: bool,
    /// Enter a `tracing` span around each call (target `lowlat::client`, name `call`: program,
    /// version, procedure, its name when known, session token, slot and call number), for a
    /// subscriber such as an OpenTelemetry pipeline to attach to. Off by default: the call path
    /// then costs one branch more, as with `trace`.
    pub spans: bool,
    /// ONC RPC only: send these AUTH_SYS credentials (AUTH_NONE when `None`).
    pub onc_auth: Option<lowlat_onc::AuthSys>,
    /// ONC RPC over TCP only: largest record fragment sent (records above it are split).
    pub onc_max_fragment: usize,
    /// lowlat's protocol over datagrams (udp://, eth://, xdp://): an end-to-end CRC32C on every
    /// frame, sent and required (both ends must agree: a frame without a valid one is dropped,
    /// and the sender's retransmission recovers). ONC RPC never carries one.
    pub checksum: bool,
    /// lowlat's protocol over the network (udp://, tcp://, eth://, xdp://): bind with this key
    /// (the server must have the same) and tag every frame under keys derived from it, so no one
    /// without the key can forge, alter or replay a call or a result. Not used over shm://,
    /// whose rings are private to this process and a server that checked its credentials, nor
    /// by ONC RPC. Read one with [`crate::read_psk_file`].
    pub psk: Option<Psk>,
    /// With `psk`, over udp://, tcp://, eth:// and xdp://: encrypt the body of every frame after
    /// the bind (AES-256-GCM where this CPU has AES instructions, else ChaCha20-Poly1305), not
    /// only tag it. Refused over shm:// ([`crate::Error::Encryption`]): the peer shares the
    /// memory the frames lie in.
    pub encrypt: bool,
    /// The CPUs the threads lowlat starts for this client may run on: its acknowledger (over
    /// udp, eth and xdp, a thread that wakes every few milliseconds) and the process's reactor
    /// (where async calls slower than their spin wait; one per process, so the client that
    /// connected last with a list decides). Empty: wherever the scheduler puts them. The
    /// calling threads are the application's own, to pin as it likes.
    pub pin_cpus: Vec<usize>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            spin: SpinPolicy::Adaptive,
            slots: 64,
            deadline: Duration::from_secs(10),
            bind_timeout: Duration::from_secs(5),
            max_message: 4 << 20,
            window: 32,
            engine: lowlat_proto::ClientEngineConfig::default(),
            trace: false,
            spans: false,
            onc_auth: None,
            onc_max_fragment: 1 << 20,
            checksum: true,
            psk: None,
            encrypt: false,
            pin_cpus: Vec::new(),
        }
    }
}

/// Options of one call, where they differ from the binding's [`ClientConfig`]: pass them to
/// [`Client::call_with`](crate::Client::call_with), or to a generated client's `with`:
/// `client.with(CallOptions::new().deadline(Duration::from_millis(5))).minus(5, 7)`.
///
/// Built with [`CallOptions::new`] and its setters, so options added later leave existing code
/// compiling.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallOptions {
    /// Fail with [`Error::Timeout`](crate::Error::Timeout) unless the call completes within this
    /// long; `None`: the binding's [`ClientConfig::deadline`].
    pub deadline: Option<Duration>,
    /// A client over several servers may send the call to another server after it may have
    /// run on one (`true`: the procedure does no harm run twice), or must not (`false`); `None`:
    /// as [`Client::idempotent`](crate::Client::idempotent) says for the procedure (not, unless
    /// listed). A call that certainly did not run goes to the next server either way.
    pub idempotent: Option<bool>,
}

impl CallOptions {
    /// The binding's defaults.
    pub const fn new() -> CallOptions {
        CallOptions { deadline: None, idempotent: None }
    }

    /// Whether the call may be sent to another server after it may have run on one
    /// ([`CallOptions::idempotent`]).
    pub const fn idempotent(mut self, idempotent: bool) -> CallOptions {
        self.idempotent = Some(idempotent);
        self
    }

    /// The call fails with [`Error::Timeout`](crate::Error::Timeout) unless it completes within
    /// `deadline`.
    pub const fn deadline(mut self, deadline: Duration) -> CallOptions {
        self.deadline = Some(deadline);
        self
    }
}

/// Serving threads per endpoint at most: each holds a 256th of the session tokens or more.
pub const MAX_SERVING_THREADS: usize = 256;

/// How a server serves.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Spin budget of a server thread before it blocks (none while the endpoint's calls fill the
    /// worker pool: every call arriving then is answered Busy).
    pub spin: SpinPolicy,
    /// Sessions at once per endpoint.
    pub max_sessions: usize,
    /// Slots granted per session at most.
    pub max_slots: u16,
    /// Sessions idle this long are dropped (within one and a half times this long).
    pub session_idle: Duration,
    /// Sessions that make no call this long after binding are dropped (within one and a quarter
    /// times this long), so that binds which are never used cannot fill the table.
    pub unused_session_idle: Duration,
    /// Sessions one source holds at once: an IP address over udp:// (whatever its ports), a
    /// MAC address over eth:// and xdp://, a connection over tcp://. When the table is full, the
    /// least recently used idle session (never-called ones first) makes room before a bind is
    /// refused. Both limits hold for the endpoint as a whole however many threads serve it;
    /// with several, a bind's thread gives up only idle sessions of its own (the others' go
    /// at their expiry).
    pub max_sessions_per_source: usize,
    /// Largest argument or result message.
    pub max_message: usize,
    /// Threads running long-running procedures.
    pub workers: usize,
    /// Long-running calls queued for the workers before new ones are shed with `Busy`.
    pub worker_queue: usize,
    /// Threads serving each endpoint (at least 1). Each holds the sessions the kernel steers to
    /// it, with its own engine, and runs their procedures: more threads put more cores behind
    /// one endpoint, at the price of a core each while they spin. Default 1: on a machine of
    /// few cores a second spinning thread takes the CPU the callers need (on two vCPUs a
    /// second one added no calls a second: docs/measurements.md), and one thread answers a
    /// null call over udp in ~6 µs of its CPU. Over udp:// and onc+udp:// (`SO_REUSEPORT`,
    /// steered by session), eth:// (`PACKET_FANOUT`, steered by session), tcp://, onc+tcp://
    /// and shm:// (connections admitted in turn and handed to the thread of their session);
    /// xdp:// refuses more than one (an AF_XDP socket serves one queue of the interface).
    /// With more than one, a spare thread joins them, and an inline procedure that blocks
    /// stalls only its own call: its thread's sessions are served by the spare after about a
    /// millisecond (docs/how-it-works.md); with one, it stalls every session. At most
    /// [`MAX_SERVING_THREADS`] (more are taken as that many).
    pub threads: usize,
    /// The CPUs the serving threads are pinned to: thread `i` of an endpoint to
    /// `pin_cpus[i % len]`; empty, none pinned. A thread that takes over another's sessions
    /// (the spare of an endpoint of several [`threads`](Self::threads)) pins itself as that
    /// one was. The worker pool and the metrics thread are never pinned (they run rarely, and
    /// wherever the scheduler finds room).
    pub pin_cpus: Vec<usize>,
    /// Note the moments of each call for accounting (`crate::trace`); off costs one branch.
    pub trace: bool,
    /// Run each procedure inside a `tracing` span (target `lowlat::server`, or `lowlat::onc`
    /// over ONC RPC; name `call`: program, version, procedure, its name, and the session token,
    /// slot and call number, or the ONC RPC xid), on whichever thread runs it. Off by default:
    /// the call path then costs one branch more.
    pub spans: bool,
    /// ONC RPC only: refuse calls without AUTH_SYS credentials (AUTH_ERROR, AUTH_TOOWEAK, as
    /// RFC 5531 has it for a flavour too weak; malformed credentials get AUTH_BADCRED).
    pub onc_require_auth_sys: bool,
    /// ONC RPC only: when not empty, refuse AUTH_SYS callers whose uid is not listed (AUTH_ERROR,
    /// AUTH_TOOWEAK). Implies `onc_require_auth_sys`.
    pub onc_allowed_uids: Vec<u32>,
    /// ONC RPC only: register with this machine's rpcbind when it runs (and unregister on clean
    /// shutdown).
    pub onc_register: bool,
    /// ONC RPC over UDP: replies remembered for retransmitted calls (the duplicate-request
    /// cache), per serving thread (a retransmission comes from the call's addresses, so the
    /// kernel's hash brings it to the thread that holds the call).
    pub onc_drc_entries: usize,
    /// lowlat's protocol over datagrams (udp://, eth://, xdp://): an end-to-end CRC32C on every
    /// frame, sent and required (both ends must agree: a frame without a valid one is dropped,
    /// and the sender's retransmission recovers). ONC RPC never carries one.
    pub checksum: bool,
    /// How long a graceful stop ([`Server::shutdown`](crate::Server::shutdown), a dropped
    /// server) waits for the calls in progress to finish before answering the rest "may have
    /// executed".
    pub drain_timeout: Duration,
    /// lowlat's protocol over the network (udp://, tcp://, eth://, xdp://): grant a binding
    /// only to a client that proves this key, and tag every frame of its session (and every
    /// cookie round and refusal, over the client's bind nonce). A client without a key is
    /// refused at once ([`Error::KeyMismatch`]); one with another key cannot verify what this
    /// server answers and reports [`Error::UnauthenticatedRefusal`] at its bind's deadline. Not
    /// used over shm://, whose rings are private to two processes whose credentials the server
    /// checked, nor by ONC RPC.
    ///
    /// [`Error::KeyMismatch`]: crate::Error::KeyMismatch
    /// [`Error::UnauthenticatedRefusal`]: crate::Error::UnauthenticatedRefusal
    pub psk: Option<Psk>,
    /// With `psk`: refuse every session whose frames are not encrypted (a client without
    /// `ClientConfig::encrypt` is refused with [`crate::Error::Encryption`]). Without it a
    /// client may still ask for encryption, and gets it. Refused with an shm:// endpoint.
    pub encrypt: bool,
    /// udp://, tcp://, onc+udp://, onc+tcp://: serve only sources in these blocks (every one,
    /// when empty). Others are dropped silently, unread, as a firewall drops them: the server
    /// neither reveals itself to a stranger nor answers an address a datagram may have forged.
    /// A refused client sees its bind time out (udp) or its connection closed (tcp), and an ONC
    /// RPC caller its call time out or its connection closed.
    pub allow: Vec<Cidr>,
    /// tcp:// and onc+tcp://: connections at once.
    pub max_connections: usize,
    /// tcp:// and onc+tcp://: connections at once from one IP address.
    pub max_connections_per_source: usize,
    /// tcp:// and onc+tcp://: a connection that has not bound (ONC RPC: has had no reply) this
    /// long after it was accepted is closed.
    pub bind_within: Duration,
}

impl ServerConfig {
    /// The serving threads each endpoint gets: [`threads`](Self::threads), within 1 and
    /// [`MAX_SERVING_THREADS`].
    pub fn serving_threads(&self) -> usize {
        self.threads.clamp(1, MAX_SERVING_THREADS)
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            spin: SpinPolicy::Adaptive,
            max_sessions: 1024,
            max_slots: 64,
            session_idle: Duration::from_secs(120),
            unused_session_idle: Duration::from_secs(5),
            max_sessions_per_source: 128,
            max_message: 4 << 20,
            workers: 4,
            worker_queue: 1024,
            threads: 1,
            pin_cpus: Vec::new(),
            trace: false,
            spans: false,
            onc_require_auth_sys: false,
            onc_allowed_uids: Vec::new(),
            onc_register: true,
            onc_drc_entries: 1024,
            checksum: true,
            drain_timeout: Duration::from_secs(5),
            psk: None,
            encrypt: false,
            allow: Vec::new(),
            max_connections: 4096,
            max_connections_per_source: 256,
            bind_within: Duration::from_secs(2),
        }
    }
}

/// Reads a pre-shared key from `path`: the file's bytes are the key, less one trailing newline
/// (so a key written by `openssl rand -hex 32 > FILE` or `head -c 32 /dev/urandom > FILE` both
/// work), at least 16 bytes of it. Both ends must read the same bytes.
pub fn read_psk_file(path: impl AsRef<std::path::Path>) -> Result<Psk, crate::Error> {
    let path = path.as_ref();
    let err = |reason: String| crate::Error::KeyFile { path: path.display().to_string(), reason };
    let mut key = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    if key.ends_with(b"\n") {
        key.pop();
        if key.ends_with(b"\r") {
            key.pop();
        }
    }
    Psk::new(&key).map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_lose_one_trailing_newline_and_must_be_long_enough() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        let text = read_psk_file(write("a", b"0123456789abcdef0123456789abcdef\n")).unwrap();
        let same = read_psk_file(write("b", b"0123456789abcdef0123456789abcdef")).unwrap();
        let cookie = lowlat_proto::wire::Cookie { epoch: 0, mac: [0; 16] };
        assert_eq!(text.prove(b"r", &cookie), same.prove(b"r", &cookie), "the newline is not part of the key");
        let e = read_psk_file(write("c", b"short\n")).unwrap_err().to_string();
        assert!(e.contains("too short") && e.contains("/c"), "{e}");
        let e = read_psk_file(dir.path().join("missing")).unwrap_err().to_string();
        assert!(e.contains("missing"), "{e}");
    }
}
