//! Client and server settings, with the defaults a person would choose without measuring.

use std::time::Duration;

use lowlat_transport::SpinPolicy;

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
    pub engine: lowlat_proto::ClientConfig,
    /// Note the moments of each call for accounting (`crate::trace`); off costs one branch.
    pub trace: bool,
    /// ONC RPC only: send these AUTH_SYS credentials (AUTH_NONE when `None`).
    pub onc_auth: Option<lowlat_onc::AuthSys>,
    /// ONC RPC over TCP only: largest record fragment sent (records above it are split).
    pub onc_max_fragment: usize,
    /// lowlat's protocol over datagrams (udp://, eth://, xdp://): an end-to-end CRC32C on every
    /// frame, sent and required (both ends must agree: a frame without a valid one is dropped,
    /// and the sender's retransmission recovers). ONC RPC never carries one.
    pub checksum: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            spin: SpinPolicy::Adaptive,
            slots: 8,
            deadline: Duration::from_secs(10),
            bind_timeout: Duration::from_secs(5),
            max_message: 4 << 20,
            window: 32,
            engine: lowlat_proto::ClientConfig::default(),
            trace: false,
            onc_auth: None,
            onc_max_fragment: 1 << 20,
            checksum: true,
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
}

impl CallOptions {
    /// The binding's defaults.
    pub const fn new() -> CallOptions {
        CallOptions { deadline: None }
    }

    /// The call fails with [`Error::Timeout`](crate::Error::Timeout) unless it completes within
    /// `deadline`.
    pub const fn deadline(mut self, deadline: Duration) -> CallOptions {
        self.deadline = Some(deadline);
        self
    }
}

/// How a server serves.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Spin budget of a server thread before it blocks.
    pub spin: SpinPolicy,
    /// Sessions at once per endpoint.
    pub max_sessions: usize,
    /// Slots granted per session at most.
    pub max_slots: u16,
    /// Sessions idle this long are dropped (within one and a half times this long).
    pub session_idle: Duration,
    /// Largest argument or result message.
    pub max_message: usize,
    /// Threads running long-running procedures.
    pub workers: usize,
    /// Long-running calls queued for the workers before new ones are shed with `Busy`.
    pub worker_queue: usize,
    /// Pin each serving thread to this CPU.
    pub pin_cpu: Option<usize>,
    /// Note the moments of each call for accounting (`crate::trace`); off costs one branch.
    pub trace: bool,
    /// ONC RPC only: refuse calls without AUTH_SYS credentials (AUTH_TOOWEAK).
    pub onc_require_auth_sys: bool,
    /// ONC RPC only: when not empty, refuse AUTH_SYS callers whose uid is not listed
    /// (AUTH_TOOWEAK). Implies `onc_require_auth_sys`.
    pub onc_allowed_uids: Vec<u32>,
    /// ONC RPC only: register with this machine's rpcbind when it runs (and unregister on clean
    /// shutdown).
    pub onc_register: bool,
    /// ONC RPC over UDP: replies remembered for retransmitted calls (the duplicate-request cache).
    pub onc_drc_entries: usize,
    /// lowlat's protocol over datagrams (udp://, eth://, xdp://): an end-to-end CRC32C on every
    /// frame, sent and required (both ends must agree: a frame without a valid one is dropped,
    /// and the sender's retransmission recovers). ONC RPC never carries one.
    pub checksum: bool,
    /// How long a graceful stop ([`Server::shutdown`](crate::Server::shutdown), a dropped
    /// server) waits for the calls in progress to finish before answering the rest "may have
    /// executed".
    pub drain_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            spin: SpinPolicy::Adaptive,
            max_sessions: 1024,
            max_slots: 64,
            session_idle: Duration::from_secs(120),
            max_message: 4 << 20,
            workers: 4,
            worker_queue: 1024,
            pin_cpu: None,
            trace: false,
            onc_require_auth_sys: false,
            onc_allowed_uids: Vec::new(),
            onc_register: true,
            onc_drc_entries: 1024,
            checksum: true,
            drain_timeout: Duration::from_secs(5),
        }
    }
}
