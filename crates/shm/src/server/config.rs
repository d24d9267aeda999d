//! What a server admits and how it serves: who may bind, ring sizes, limits, the spin policy.

use std::time::Duration;

use lowlat_sys as sys;
use lowlat_wait::SpinPolicy;

use crate::segment::Layout;

/// Who may bind. A peer is allowed when its uid or its primary gid is listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerPolicy {
    /// Users allowed, by uid.
    pub uids: Vec<u32>,
    /// Groups allowed, by primary gid.
    pub gids: Vec<u32>,
}

impl PeerPolicy {
    /// Only the server's own effective user (the default).
    pub fn same_user() -> PeerPolicy {
        PeerPolicy { uids: vec![sys::effective_uid()], gids: vec![] }
    }

    /// The peer with these credentials may bind.
    pub fn allows(&self, uid: u32, gid: u32) -> bool {
        self.uids.contains(&uid) || self.gids.contains(&gid)
    }
}

/// Server-side settings.
#[derive(Clone, Debug)]
pub struct ShmServerConfig {
    /// Permissions of the socket file.
    pub mode: u32,
    /// Who may bind (default: the server's own user).
    pub policy: PeerPolicy,
    /// Ring sizes of every connection.
    pub layout: Layout,
    /// The largest request accepted (larger ones close the connection).
    pub max_message: usize,
    /// How the server thread waits for calls before arming a connection and sleeping.
    pub spin: SpinPolicy,
    /// How long a client may leave its result ring full (no room freed for a reply waiting to
    /// be written) before its connection is dropped. Other connections are served meanwhile.
    pub stall_limit: Duration,
    /// Connections beyond this many connections are refused as busy.
    pub max_connections: usize,
    /// Bytes of replies one serving thread keeps, across its connections, for clients slow to
    /// read them ([`Reply::send`](super::Reply::send)). Past this a reply waits for room where
    /// it is (up to the stall limit), the thread's other connections waiting meanwhile: clients
    /// that ask for large results and leave them unread cannot make the server hold more.
    pub max_kept: usize,
    /// Bytes of reassembly buffers (grown for requests streamed through a call ring, and kept
    /// so that the next is assembled without allocating again) one serving thread keeps across
    /// its connections between requests. Past this a connection gives back what it grew after
    /// each request: connections that once sent large requests cannot make the server hold
    /// `max_connections` times the largest.
    pub max_grown: usize,
}

impl Default for ShmServerConfig {
    fn default() -> Self {
        ShmServerConfig {
            mode: 0o600,
            policy: PeerPolicy::same_user(),
            layout: Layout { call_ring: 64 << 10, result_ring: 64 << 10 },
            max_message: 16 << 20,
            spin: SpinPolicy::Adaptive,
            stall_limit: Duration::from_millis(100),
            max_connections: 4096,
            max_kept: 64 << 20,
            max_grown: 64 << 20,
        }
    }
}
