//! Raw Ethernet exchanges across a [`TestHosts`] pair (what the ladder sets beside RPC over
//! eth:// and xdp://): a server in namespace `a`
//! and a client in namespace `b`, each on its own thread (pinned when asked), exchanging raw
//! ping-pong frames. For `lowlat lab` and the `rawbench` example.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lowlat_eth::frame::FrameType;
use lowlat_eth::{Error, Result};
use lowlat_eth::{EthConfig, EthSocket, FrameSocket, XdpConfig, XdpSocket};
use lowlat_sys::pin_to_cpu;
use lowlat_testkit::testhosts::{self, TestHosts};

use super::eth_pingpong::{self as pingpong, Floor, RunConfig};

/// A socket to open on one side.
#[derive(Clone, Copy, Debug)]
pub enum Side {
    /// An AF_PACKET socket ([`EthSocket`]).
    Eth(EthConfig),
    /// An AF_XDP socket ([`XdpSocket`]).
    Xdp(XdpConfig),
}

impl Side {
    fn open(self, iface: &str, server: bool) -> Result<Box<dyn FrameSocket>> {
        Ok(match self {
            Side::Eth(c) => Box::new(EthSocket::open(iface, EthConfig { answer_discovery: server, ..c })?),
            Side::Xdp(c) => Box::new(XdpSocket::open(iface, XdpConfig { answer_discovery: server, ..c })?),
        })
    }
}

/// What answers the client's frames.
#[derive(Clone, Copy, Debug)]
pub enum Responder {
    /// A user-level echo server on this socket.
    User(Side),
    /// lowlat's XDP echo program in the server interface's receive path (the floor); the
    /// client sends PING frames.
    XdpFloor,
}

/// CPUs for the two threads (None: unpinned).
#[derive(Clone, Copy, Debug, Default)]
pub struct Pinning {
    /// The server thread's CPU.
    pub server: Option<usize>,
    /// The client thread's CPU.
    pub client: Option<usize>,
}

fn joined<T>(r: std::thread::Result<testhosts::Result<Result<T>>>) -> Result<T> {
    let entered = r.map_err(|_| io_error("a ping-pong thread", "panicked"))?;
    entered.map_err(|e| io_error("entering a test namespace", e.to_string()))?
}

fn io_error(op: &'static str, why: impl Into<String>) -> Error {
    Error::Io { op, source: std::io::Error::other(why.into()) }
}

/// Runs one raw ping-pong measurement across `h`: round trips in nanoseconds.
pub fn across(h: &TestHosts, responder: Responder, client: Side, cfg: &RunConfig, pin: Pinning) -> Result<Vec<u64>> {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
    let iface = h.a.iface.clone();
    let st = stop.clone();
    let spin = cfg.spin;
    let server = h.a.spawn(move || -> Result<u64> {
        if let Some(c) = pin.server {
            let _ = pin_to_cpu(c);
        }
        match responder {
            Responder::User(side) => {
                let mut s = match side.open(&iface, true) {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return Ok(0);
                    }
                };
                let _ = ready_tx.send(Ok(()));
                pingpong::serve(s.as_mut(), spin, &st)
            }
            Responder::XdpFloor => {
                let floor = match Floor::attach(&iface, None) {
                    Ok(f) => f,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return Ok(0);
                    }
                };
                let _ = ready_tx.send(Ok(()));
                // The program answers; this thread only keeps it attached until the end.
                while !st.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                drop(floor);
                Ok(0)
            }
        }
    });
    let started = ready_rx
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| Err(io_error("starting the ping-pong server", "timed out")));
    let result = started.and_then(|()| {
        let (iface, peer) = (h.b.iface.clone(), h.a.mac);
        let kind = if matches!(responder, Responder::XdpFloor) { FrameType::Ping } else { FrameType::Data };
        let cfg = RunConfig { kind, ..*cfg };
        joined(
            h.b.spawn(move || {
                if let Some(c) = pin.client {
                    let _ = pin_to_cpu(c);
                }
                let mut c = client.open(&iface, false)?;
                pingpong::run(c.as_mut(), peer, &cfg)
            })
            .join(),
        )
    });
    stop.store(true, Ordering::Relaxed);
    let served = joined(server.join());
    let lat = result?;
    served?;
    Ok(lat)
}
