//! Raw ping-pong over eth:// and xdp:// with no RPC layer: the transports' floor, and below it
//! the interrupt-level floor, where an XDP program answers inside the driver's receive path
//! (Bjørndalen et al.'s interrupt-handler endpoint).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lowlat_eth::bpf::{self, Link, Program, XdpMode};
use lowlat_eth::frame::FrameType;
use lowlat_eth::ifinfo::IfInfo;
use lowlat_eth::{Error, FrameSocket, Mac, Result};
use lowlat_wait::{SpinPolicy, Spinner};

/// lowlat's echo program attached to an interface: PING frames are answered by the driver.
/// Dropping it detaches the program.
pub struct Floor {
    _link: Link,
    _prog: Program,
    mode: XdpMode,
}

impl Floor {
    /// Attaches the echo program to `iface` (in the calling thread's namespace). `mode` None
    /// picks as [`bpf::attach_best`] does: generic on veth (there a native XDP_TX reaches the
    /// peer only when the peer runs XDP or GRO itself, and generic is faster anyway), native
    /// elsewhere.
    pub fn attach(iface: &str, mode: Option<XdpMode>) -> Result<Floor> {
        let info = IfInfo::get(iface)?;
        let prog = Program::load_xdp("lowlat_echo", &bpf::echo_program())?;
        let (link, mode) = bpf::attach_best(&prog, info.index, iface, &info.driver, mode)?;
        Ok(Floor { _link: link, _prog: prog, mode })
    }

    /// The mode the program was attached in.
    pub fn mode(&self) -> XdpMode {
        self.mode
    }
}

/// Echoes every DATA or PING payload back to its sender until `stop` is set; returns how many.
pub fn serve(sock: &mut dyn FrameSocket, spin: SpinPolicy, stop: &AtomicBool) -> Result<u64> {
    let mut buf = vec![0u8; sock.max_payload()];
    let mut spinner = Spinner::new(spin);
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        // Bounded waits, so that `stop` is noticed.
        let deadline = Instant::now() + Duration::from_millis(50);
        if let Some((len, src)) = sock.recv_from(&mut buf, &mut spinner, Some(deadline))? {
            sock.send_to(src, &buf[..len], &[])?;
            n += 1;
        }
    }
    Ok(n)
}

/// One ping-pong run.
#[derive(Clone, Copy, Debug)]
pub struct RunConfig {
    /// Payload bytes per frame (at least 8: a sequence number).
    pub size: usize,
    /// Round trips measured (after the warm-up).
    pub rounds: usize,
    /// Round trips before measuring.
    pub warmup: usize,
    /// How the client waits for each reply.
    pub spin: SpinPolicy,
    /// DATA for a user-level echo server, PING for the XDP floor.
    pub kind: FrameType,
    /// Longest wait for one reply.
    pub timeout: Duration,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            size: 32,
            rounds: 10_000,
            warmup: 1_000,
            spin: SpinPolicy::Forever,
            kind: FrameType::Data,
            timeout: Duration::from_secs(1),
        }
    }
}

/// Sends `rounds` payloads to `peer` one at a time, each after the previous reply; returns
/// each round trip in nanoseconds. A reply not received within `timeout` is [`Error::NoReply`].
pub fn run(sock: &mut dyn FrameSocket, peer: Mac, cfg: &RunConfig) -> Result<Vec<u64>> {
    let size = cfg.size.clamp(8, sock.max_payload());
    let mut msg = vec![0u8; size];
    for (i, b) in msg.iter_mut().enumerate().skip(8) {
        *b = i as u8;
    }
    let mut buf = vec![0u8; sock.max_payload()];
    let mut spinner = Spinner::new(cfg.spin);
    let mut out = Vec::with_capacity(cfg.rounds);
    for seq in 0..(cfg.warmup + cfg.rounds) as u64 {
        msg[..8].copy_from_slice(&seq.to_le_bytes());
        let start = Instant::now();
        sock.send_kind(peer, cfg.kind, &msg, &[])?;
        let deadline = start + cfg.timeout;
        loop {
            let Some((len, _)) = sock.recv_from(&mut buf, &mut spinner, Some(deadline))? else {
                return Err(Error::NoReply { iface: sock.iface().name.clone(), waited: cfg.timeout });
            };
            // A late reply to an earlier round is skipped, never counted as this one.
            if len == size && buf[..8] == seq.to_le_bytes() {
                break;
            }
        }
        let rtt = start.elapsed().as_nanos() as u64;
        if seq as usize >= cfg.warmup {
            out.push(rtt);
        }
    }
    Ok(out)
}

/// Percentiles of a set of round trips, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Summary {
    /// Round trips summarised.
    pub count: usize,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// The slowest.
    pub max: u64,
    /// Arithmetic mean.
    pub mean: u64,
}

/// Summarises `lat` (sorting it).
pub fn summarize(lat: &mut [u64]) -> Summary {
    if lat.is_empty() {
        return Summary::default();
    }
    lat.sort_unstable();
    let q = |p: f64| lat[(((lat.len() as f64) * p).ceil() as usize).clamp(1, lat.len()) - 1];
    Summary {
        count: lat.len(),
        p50: q(0.50),
        p90: q(0.90),
        p99: q(0.99),
        p999: q(0.999),
        max: lat[lat.len() - 1],
        mean: lat.iter().sum::<u64>() / lat.len() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let mut v: Vec<u64> = (1..=1000).rev().collect();
        let s = summarize(&mut v);
        assert_eq!((s.count, s.p50, s.p90, s.p99, s.p999, s.max, s.mean), (1000, 500, 900, 990, 999, 1000, 500));
        assert_eq!(summarize(&mut []), Summary::default());
        assert_eq!(summarize(&mut [7]).p99, 7);
    }
}
