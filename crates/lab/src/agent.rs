//! The laboratory's remote half: `lowlat agent` runs on a second host and starts, on request,
//! the far ends that `lowlat lab --remote` measures against (`lowlat serve`, `lowlat pingpong
//! --serve [--floor]`, the busy-server workload), stops them by PID, and describes its machine.
//!
//! The control protocol is a lowlat program of its own ([`PROGRAM`], served over tcp://),
//! bound under the agent's pre-shared key: a caller without the key is refused at bind, before
//! any procedure runs. Its messages are JSON documents of the types below, because they are few
//! and off every measured path, and because the machine's facts then travel exactly as
//! `results.json` stores them.
//!
//! A caller never names a program to run: it asks for a [`Role`] (a server of one of the
//! network transports, a ping-pong or floor echo, the workload) and the agent builds the
//! command line of its own executable from it. Every child belongs to a lease that the caller
//! renews; the agent stops the children of a lease that is closed or not renewed in time (the
//! laboratory went away), and all of them when it stops itself.
//!
//! [`serve`] is the agent's side, [`client`] the laboratory's, [`facts`] what each machine says
//! of itself.

pub mod client;
pub mod facts;
pub mod serve;

use serde::{Deserialize, Serialize};

pub use client::{AgentClient, RemoteProcess};
pub use serve::{Agent, AgentConfig};

/// The agent's program number, 0x20004C4F (beside the lab, trace and stats programs).
pub const PROGRAM: u32 = 0x2000_4C4F;
/// The agent's program version.
pub const VERSION: u32 = 1;
/// The agent's port when `lowlat agent` or `lab --remote` is given none.
pub const DEFAULT_PORT: u16 = 7460;

/// `OPEN() -> Opened`: a new lease.
pub const OPEN: u32 = 1;
/// `RENEW(u64 lease)`: the lease is still wanted.
pub const RENEW: u32 = 2;
/// `SPAWN(SpawnRequest) -> Spawned`: start a far end and wait (bounded) until it serves.
pub const SPAWN: u32 = 3;
/// `LINE(LineRequest) -> Option<String>`: the next line a child printed, within a timeout.
pub const LINE: u32 = 4;
/// `STOP(StopRequest) -> Vec<String>`: stop a child by PID; the lines it printed meanwhile.
pub const STOP: u32 = 5;
/// `CLOSE(u64 lease) -> u32`: stop every child of a lease and forget it; how many were stopped.
pub const CLOSE: u32 = 6;
/// `MACHINE() -> Machine`: the agent's machine, with its interface toward the caller.
pub const MACHINE: u32 = 7;

/// The procedures by number, as errors name them.
pub const PROCEDURES: [(u32, &str); 7] = [
    (OPEN, "OPEN"),
    (RENEW, "RENEW"),
    (SPAWN, "SPAWN"),
    (LINE, "LINE"),
    (STOP, "STOP"),
    (CLOSE, "CLOSE"),
    (MACHINE, "MACHINE"),
];

/// A network transport the agent serves (shared memory and Unix sockets have no meaning
/// across hosts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// `udp://`
    Udp,
    /// `tcp://`
    Tcp,
    /// `onc+udp://`
    #[serde(rename = "onc+udp")]
    OncUdp,
    /// `onc+tcp://`
    #[serde(rename = "onc+tcp")]
    OncTcp,
    /// `eth://` (AF_PACKET on the agent's interface)
    Eth,
    /// `xdp://` (AF_XDP on the agent's interface)
    Xdp,
}

impl Scheme {
    /// The scheme as URIs spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Udp => "udp",
            Scheme::Tcp => "tcp",
            Scheme::OncUdp => "onc+udp",
            Scheme::OncTcp => "onc+tcp",
            Scheme::Eth => "eth",
            Scheme::Xdp => "xdp",
        }
    }

    /// The scheme of a URI's name (`udp`, `onc+tcp`, ...), if the agent serves it.
    pub fn parse(name: &str) -> Option<Scheme> {
        [Scheme::Udp, Scheme::Tcp, Scheme::OncUdp, Scheme::OncTcp, Scheme::Eth, Scheme::Xdp]
            .into_iter()
            .find(|s| s.as_str() == name)
    }

    /// Whether it runs over raw Ethernet frames on an interface rather than IP.
    pub fn is_ethernet(self) -> bool {
        matches!(self, Scheme::Eth | Scheme::Xdp)
    }
}

/// What to start: the agent turns it into the arguments of its own executable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Role {
    /// `lowlat serve`: the lab interface on a fresh address of the scheme.
    Rpc {
        /// The transport.
        scheme: Scheme,
        /// The serving threads' spin policy, as `--spin-us` takes it.
        spin: String,
        /// Bind with the agent's key (`lab --psk-file` with the agent's key file).
        keyed: bool,
    },
    /// `lowlat pingpong --serve`: lowlat's transport with no RPC layer.
    Raw {
        /// The transport.
        scheme: Scheme,
        /// The echo's spin policy.
        spin: String,
    },
    /// `lowlat pingpong --serve --floor`: the simplest exchange the path allows.
    Floor {
        /// The transport.
        scheme: Scheme,
        /// The echo's spin policy.
        spin: String,
    },
    /// `lowlat workload`: the busy server's CPU-bound workload, for this many seconds.
    Workload {
        /// How long it runs, 0.01 to [`MAX_WORKLOAD_SECONDS`].
        seconds: f64,
    },
}

/// The longest workload an agent runs.
pub const MAX_WORKLOAD_SECONDS: f64 = 60.0;
/// The longest an agent waits for a child's next line.
pub const MAX_LINE_WAIT_MS: u64 = 120_000;

/// A lease on the agent's children.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Opened {
    /// The lease's number, to give with every request.
    pub lease: u64,
    /// How long the lease lasts without a renewal, in milliseconds.
    pub lease_ms: u64,
}

/// `SPAWN`'s argument.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpawnRequest {
    /// The lease the child belongs to.
    pub lease: u64,
    /// What to start.
    pub role: Role,
}

/// A started child.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spawned {
    /// Its process id on the agent's host.
    pub pid: u32,
    /// The URIs it printed (`serving URI`), as it printed them (a wildcard address stays one).
    pub uris: Vec<String>,
}

/// `LINE`'s argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineRequest {
    /// The lease the child belongs to.
    pub lease: u64,
    /// The child.
    pub pid: u32,
    /// How long to wait, at most [`MAX_LINE_WAIT_MS`].
    pub timeout_ms: u64,
}

/// `STOP`'s argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopRequest {
    /// The lease the child belongs to.
    pub lease: u64,
    /// The child.
    pub pid: u32,
}

/// Why the agent could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The address is not `HOST[:PORT]`, or the host has no address.
    #[error("{address}: not an agent address: {reason}")]
    Address {
        /// As given.
        address: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The agent refused this client at bind: it does not hold the agent's key.
    #[error("agent {agent} refused this client: {source}")]
    Refused {
        /// The agent's address.
        agent: String,
        /// The binding's refusal (`Error::KeyMismatch` or `Error::UnauthenticatedRefusal`).
        source: lowlat::Error,
    },
    /// The agent could not be reached or bound.
    #[error("agent {agent} could not be reached: {source}")]
    Unreachable {
        /// The agent's address.
        agent: String,
        /// What the binding said.
        source: lowlat::Error,
    },
    /// A procedure failed; the agent's own reasons are in `source`.
    #[error("agent {agent}: {source}")]
    Call {
        /// The agent's address.
        agent: String,
        /// The call's error (a refusal of the agent's says why in words).
        source: lowlat::Error,
    },
}
