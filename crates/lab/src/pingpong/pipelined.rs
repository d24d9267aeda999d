//! Pipelined ping-pong: the throughput of an exchange with up to W messages in flight, and the
//! CPU each side spends per exchange (DESIGN principle 13; Riddoch's per-request cost).
//!
//! [`run_pipelined`] keeps up to `in_flight` messages unanswered: it sends while fewer than W
//! are outstanding and takes answers as they arrive, busy-polling (no wait strategy: the figure is
//! what one client core can drive). Every message starts with its sequence number (so answers are
//! matched, and a lost, duplicated or altered one is seen) and is otherwise the same pattern,
//! checked on every echo. Over:
//! - shm:// with `floor`: rings of one-line records, data then flag
//!   ([`crate::raw::shm_floor_ring`]; the server is `lowlat pingpong --floor --serve`);
//! - udp:// with `floor`: a connected socket sending and receiving with `sendmmsg`/`recvmmsg`,
//!   against the batched echo of [`crate::raw::udp_floor`];
//! - shm://, udp://, tcp:// without `floor`: lowlat's own transports (`ShmChannel`,
//!   `UdpChannel`, `TcpChannel`), no RPC on them, against `lowlat pingpong --serve`.
//!
//! UDP may drop: when nothing arrives for [`PipelineOptions::loss_timeout`] with messages
//! outstanding, those are counted lost and the window moves on; an echo arriving after that is
//! counted late. Shared memory and TCP lose nothing, so there a silence of
//! [`PipelineOptions::timeout`] fails the run, as it does anywhere when nothing at all arrives.
//!
//! The client's CPU is its own thread's clock over the measured exchanges; the server's, its
//! serving thread's clock read in band before and after them ([`crate::raw::cpu_report`]).
//! Buffers are built before the first exchange: the exchange loop allocates nothing.

use std::io;
use std::net::UdpSocket;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use lowlat::Endpoint;
use lowlat_shm::ShmChannel;
use lowlat_sys::mmsg::Batch;
use lowlat_transport::tcp::TcpChannel;
use lowlat_transport::udp::{resolve, UdpChannel};

use super::{io_err, PingPongError};
use crate::raw::cpu_report::{self, Answer};
use crate::raw::shm_floor_ring::{RingEnd, MAX_RING_RECORDS, REPORT_BIT};

/// The most messages a pipelined run keeps in flight (the shared-memory floor's largest ring).
pub const MAX_IN_FLIGHT: usize = MAX_RING_RECORDS;
/// Messages sent per `sendmmsg` by the udp floor's client.
const SEND_BATCH: usize = 32;
/// Empty polls between looks at the clock: a clock read costs more than a poll of a ring.
const POLLS_PER_LOOK: u32 = 1 << 10;
/// Messages given up that a window remembers, to tell their late echoes from duplicates.
const REMEMBERED: usize = 1024;
/// Times a report is asked over udp before the run goes without the server's CPU.
const REPORT_TRIES: u32 = 5;

/// How a pipelined run goes beyond its URI, size, count and window.
#[derive(Clone, Copy, Debug)]
pub struct PipelineOptions {
    /// The machine's floor (shm:// and udp:// only) instead of lowlat's transport.
    pub floor: bool,
    /// Exchanges made before the measured ones.
    pub warmup: u64,
    /// A silence this long fails the run (and bounds connecting).
    pub timeout: Duration,
    /// udp:// only: a silence this long with messages outstanding counts them lost.
    pub loss_timeout: Duration,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            floor: false,
            warmup: 2_000,
            timeout: Duration::from_secs(5),
            loss_timeout: Duration::from_millis(50),
        }
    }
}

/// What a pipelined run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Throughput {
    /// "shm", "udp" or "tcp".
    pub transport: &'static str,
    /// Whether this was the machine's floor rather than lowlat's transport.
    pub floor: bool,
    /// Bytes per message.
    pub size: usize,
    /// Messages kept in flight at most (W).
    pub in_flight: usize,
    /// Exchanges answered in the measured window.
    pub exchanges: u64,
    /// Messages counted lost (udp only): no echo within the loss timeout.
    pub lost: u64,
    /// Echoes that arrived after their message was counted lost.
    pub late: u64,
    /// Wall time of the measured window.
    pub wall: Duration,
    /// CPU time of the client's thread over the measured window.
    pub client_cpu: Duration,
    /// CPU time of the server's serving thread over the measured window, if it reported it.
    pub server_cpu: Option<Duration>,
}

impl Throughput {
    /// Exchanges per second of wall time.
    pub fn exchanges_per_s(&self) -> f64 {
        self.exchanges as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// The client's CPU ns per exchange.
    pub fn client_cpu_ns_per_exchange(&self) -> f64 {
        self.client_cpu.as_nanos() as f64 / self.exchanges.max(1) as f64
    }

    /// The server's CPU ns per exchange, if it reported its CPU time.
    pub fn server_cpu_ns_per_exchange(&self) -> Option<f64> {
        self.server_cpu.map(|c| c.as_nanos() as f64 / self.exchanges.max(1) as f64)
    }

    /// One JSON object: `kind` "raw", `transport`, `proc` ("floor" or "pingpong"), `size`,
    /// `in_flight`, `exchanges`, `lost`, `late`, `wall_s`, `exchanges_per_s`,
    /// `client_cpu_ns_per_exchange`, `server_cpu_ns_per_exchange` (null when not reported).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "raw",
            "transport": self.transport,
            "proc": if self.floor { "floor" } else { "pingpong" },
            "size": self.size,
            "in_flight": self.in_flight,
            "exchanges": self.exchanges,
            "lost": self.lost,
            "late": self.late,
            "wall_s": self.wall.as_secs_f64(),
            "exchanges_per_s": self.exchanges_per_s(),
            "client_cpu_ns_per_exchange": self.client_cpu_ns_per_exchange(),
            "server_cpu_ns_per_exchange": self.server_cpu_ns_per_exchange(),
        })
    }
}

impl std::fmt::Display for Throughput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = if self.floor { "floor" } else { "raw" };
        write!(
            f,
            "{} {what} W={} size={}: {:.0} exchanges/s ({} in {:.3} s), CPU per exchange: client {:.0} ns, server ",
            self.transport,
            self.in_flight,
            self.size,
            self.exchanges_per_s(),
            self.exchanges,
            self.wall.as_secs_f64(),
            self.client_cpu_ns_per_exchange(),
        )?;
        match self.server_cpu_ns_per_exchange() {
            Some(ns) => write!(f, "{ns:.0} ns")?,
            None => write!(f, "not reported")?,
        }
        if self.lost > 0 || self.late > 0 {
            write!(f, "; lost {}, late {}", self.lost, self.late)?;
        }
        Ok(())
    }
}

/// Makes `exchanges` measured exchanges of `size`-byte messages (after `opts.warmup` unmeasured
/// ones) with up to `in_flight` unanswered, against the echo server at `uri` (see the module
/// documentation for the transports and servers). Fails with a typed error, never a hang: on
/// W = 0 or W above [`MAX_IN_FLIGHT`], a size that cannot carry a sequence number (under 8
/// bytes; the shm floor also needs a multiple of 8 up to 64), a scheme without a pipelined
/// exchange, a silence of `opts.timeout`, or an echo that does not match its message.
pub fn run_pipelined(
    uri: &str,
    size: usize,
    exchanges: u64,
    in_flight: usize,
    opts: PipelineOptions,
) -> Result<Throughput, PingPongError> {
    if in_flight == 0 || in_flight > MAX_IN_FLIGHT {
        return Err(PingPongError::InFlight { asked: in_flight, max: MAX_IN_FLIGHT });
    }
    if size < 8 {
        return Err(PingPongError::Size { size, why: "a pipelined message starts with its 8-byte sequence number" });
    }
    let ep: Endpoint = uri.parse()?;
    let transport = match &ep {
        Endpoint::Shm { .. } => "shm",
        Endpoint::Udp { .. } => "udp",
        Endpoint::Tcp { .. } => "tcp",
        // The other schemes are refused with their reason below.
        _ => "",
    };
    let mut shape = Throughput {
        transport,
        floor: opts.floor,
        size,
        in_flight,
        exchanges: 0,
        lost: 0,
        late: 0,
        wall: Duration::ZERO,
        client_cpu: Duration::ZERO,
        server_cpu: None,
    };
    let pattern = Pattern::new(size);
    let connect_err = |e: lowlat_shm::ShmError| PingPongError::Io {
        op: format!("connect {uri}"),
        source: io::Error::other(e.to_string()),
    };
    match ep {
        Endpoint::Shm { path } if opts.floor => {
            if size & 7 != 0 || size > crate::raw::shm_floor_ring::RECORD {
                return Err(PingPongError::Size { size, why: "a shm floor record is a multiple of 8 bytes up to 64" });
            }
            let records = in_flight.next_power_of_two();
            let (end, sock) =
                crate::raw::shm_floor::connect_ring(&path, records, size, opts.timeout).map_err(connect_err)?;
            drive(&mut ShmFloorLane { end, pattern, rx: 0, _sock: sock }, exchanges, in_flight, opts, &mut shape)?;
        }
        Endpoint::Udp { host_port } if opts.floor => {
            let addr = resolve(&host_port).map_err(io_err(uri))?;
            let local = if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
            let sock = UdpSocket::bind(local).map_err(io_err(format!("bind a socket for {uri}")))?;
            sock.connect(addr).map_err(io_err(format!("connect {uri}")))?;
            sock.set_nonblocking(true).map_err(io_err("set non-blocking"))?;
            let mut lane = UdpFloorLane {
                sock,
                out: Batch::new(SEND_BATCH, size),
                inbox: Batch::new(crate::raw::udp_floor::BATCH, size.max(cpu_report::ANSWER_LEN)),
                pattern,
            };
            drive(&mut lane, exchanges, in_flight, opts, &mut shape)?;
        }
        Endpoint::Shm { .. } | Endpoint::Udp { .. } | Endpoint::Tcp { .. } if opts.floor => {
            return Err(PingPongError::NoFloor(format!("{uri} with --in-flight (shm:// and udp:// have one)")));
        }
        Endpoint::Shm { path } => {
            let cfg = lowlat_shm::ChannelConfig { connect_timeout: opts.timeout, ..Default::default() };
            let ch = ShmChannel::connect(&path, cfg).map_err(connect_err)?;
            drive(&mut ShmLane { ch, pattern }, exchanges, in_flight, opts, &mut shape)?;
        }
        Endpoint::Udp { host_port } => {
            let addr = resolve(&host_port).map_err(io_err(uri))?;
            let ch = UdpChannel::connect(addr).map_err(io_err(format!("connect {uri}")))?;
            let buf = vec![0u8; size.max(cpu_report::ANSWER_LEN) + 1];
            drive(&mut FrameLane { ch, buf, pattern }, exchanges, in_flight, opts, &mut shape)?;
        }
        Endpoint::Tcp { host_port } => {
            let addr = resolve(&host_port).map_err(io_err(uri))?;
            let ch = TcpChannel::connect(addr, 16 << 20, opts.timeout).map_err(io_err(format!("connect {uri}")))?;
            let buf = Vec::with_capacity(size.max(cpu_report::ANSWER_LEN));
            drive(&mut FrameLane { ch, buf, pattern }, exchanges, in_flight, opts, &mut shape)?;
        }
        other => return Err(PingPongError::Unsupported(format!("{} with --in-flight", other.scheme()))),
    }
    Ok(shape)
}

/// The bytes of every message: the sequence number, then a fixed pattern checked on every echo.
struct Pattern {
    msg: Vec<u8>,
}

impl Pattern {
    fn new(size: usize) -> Pattern {
        Pattern { msg: (0..size).map(|i| i as u8).collect() }
    }

    /// Message `seq`, ready to send.
    #[inline]
    fn stamp(&mut self, seq: u64) -> &[u8] {
        self.msg[..8].copy_from_slice(&seq.to_le_bytes());
        &self.msg
    }

    /// The sequence number an echo carries, if it is an intact echo of one of our messages.
    #[inline]
    fn check(&self, echo: &[u8]) -> Result<u64, PingPongError> {
        match echo.split_first_chunk::<8>() {
            Some((seq, rest)) if echo.len() == self.msg.len() && rest == &self.msg[8..] => Ok(u64::from_le_bytes(*seq)),
            _ => Err(PingPongError::Mismatch(format!(
                "an echo of {} bytes is not one of the {}-byte messages sent",
                echo.len(),
                self.msg.len()
            ))),
        }
    }
}

/// Which messages are outstanding, which answered, which lost; the window moves past `lo` only
/// when its message is answered or given up. Answers in order cost one comparison.
struct Window {
    /// The oldest message neither answered nor given up.
    lo: u64,
    /// The next message to send.
    next: u64,
    w: u64,
    /// Messages answered out of order, at `seq & mask`.
    answered: Vec<bool>,
    mask: u64,
    /// How many entries of `answered` are set.
    holes: u64,
    /// Messages given up and not answered since (the oldest forgotten past the capacity), so
    /// that a late echo is told from a duplicate.
    given_up: Vec<u64>,
    completed: u64,
    lost: u64,
    late: u64,
}

impl Window {
    fn new(w: usize) -> Window {
        let cap = w.next_power_of_two();
        Window {
            lo: 1,
            next: 1,
            w: w as u64,
            answered: vec![false; cap],
            mask: cap as u64 - 1,
            holes: 0,
            given_up: Vec::with_capacity(REMEMBERED),
            completed: 0,
            lost: 0,
            late: 0,
        }
    }

    /// Messages sent and neither answered nor given up.
    fn outstanding(&self) -> u64 {
        self.next - self.lo - self.holes
    }

    #[inline]
    fn answer(&mut self, seq: u64) -> Result<(), PingPongError> {
        if seq == self.lo && self.holes == 0 {
            self.lo += 1;
            self.completed += 1;
            return Ok(());
        }
        if seq < self.lo {
            let Some(i) = self.given_up.iter().position(|&s| s == seq) else {
                return Err(PingPongError::Mismatch(format!("message {seq} was echoed twice")));
            };
            self.given_up.swap_remove(i);
            self.late += 1;
            return Ok(());
        }
        if seq >= self.next {
            return Err(PingPongError::Mismatch(format!("an echo of message {seq}, not sent yet")));
        }
        let i = (seq & self.mask) as usize;
        if self.answered[i] {
            return Err(PingPongError::Mismatch(format!("message {seq} was echoed twice")));
        }
        self.answered[i] = true;
        self.holes += 1;
        self.completed += 1;
        while self.lo < self.next && self.answered[(self.lo & self.mask) as usize] {
            self.answered[(self.lo & self.mask) as usize] = false;
            self.holes -= 1;
            self.lo += 1;
        }
        Ok(())
    }

    /// Gives up every outstanding message (counted lost); the window restarts at `next`.
    fn give_up(&mut self) {
        for seq in self.lo..self.next {
            let i = (seq & self.mask) as usize;
            if std::mem::take(&mut self.answered[i]) {
                self.holes -= 1;
            } else {
                self.lost += 1;
                if self.given_up.len() == REMEMBERED {
                    self.given_up.remove(0);
                }
                self.given_up.push(seq);
            }
        }
        self.lo = self.next;
    }

    /// Takes the next sequence number for a message outside the window (a report).
    fn take_one(&mut self) -> u64 {
        debug_assert_eq!(self.lo, self.next, "reports go with nothing outstanding");
        self.next += 1;
        self.lo = self.next;
        self.next - 1
    }
}

/// One transport's side of a pipelined exchange.
trait Lane {
    /// Whether messages may be lost (and so given up after a silence).
    const LOSSY: bool;
    /// Sends messages `seqs` in order without waiting; returns how many went (the first ones).
    fn send(&mut self, seqs: Range<u64>) -> Result<u64, PingPongError>;
    /// Takes every answer ready now, without waiting, handing each's sequence number to
    /// `answer`; returns how many it took.
    fn poll(&mut self, answer: impl FnMut(u64) -> Result<(), PingPongError>) -> Result<usize, PingPongError>;
    /// Asks the server for its CPU time as message `seq` (nothing else outstanding).
    fn ask(&mut self, seq: u64) -> Result<(), PingPongError>;
    /// The server's answer to [`Self::ask`], if it came; ordinary echoes met meanwhile (late
    /// ones) are counted in `late`.
    fn answer(&mut self, seq: u64, late: &mut u64) -> Result<Option<Answer>, PingPongError>;
}

/// Runs the warm-up, a report, the measured exchanges and a report; fills `out`.
fn drive<L: Lane>(
    lane: &mut L,
    exchanges: u64,
    in_flight: usize,
    opts: PipelineOptions,
    out: &mut Throughput,
) -> Result<(), PingPongError> {
    let mut win = Window::new(in_flight);
    exchange(lane, &mut win, opts.warmup, opts)?;
    let before = report(lane, &mut win, opts)?;
    win.completed = 0;
    win.lost = 0;
    win.late = 0;
    let (t0, c0) = (Instant::now(), lowlat_sys::process::thread_cpu_time());
    exchange(lane, &mut win, exchanges, opts)?;
    let (wall, cpu) = (t0.elapsed(), lowlat_sys::process::thread_cpu_time().saturating_sub(c0));
    let (completed, lost) = (win.completed, win.lost);
    let after = report(lane, &mut win, opts)?;
    out.exchanges = completed;
    out.lost = lost;
    out.late = win.late;
    out.wall = wall;
    out.client_cpu = cpu;
    out.server_cpu = match (before, after) {
        (Some(b), Some(a)) => Some(Duration::from_nanos(a.saturating_sub(b))),
        _ => None,
    };
    Ok(())
}

/// Makes `count` more exchanges answered, keeping up to `win.w` messages in the window.
fn exchange<L: Lane>(lane: &mut L, win: &mut Window, count: u64, opts: PipelineOptions) -> Result<(), PingPongError> {
    let goal = win.completed + count;
    let mut idle = 0u32;
    // Since the last answer (the run fails after `timeout`), and since the last answer or
    // give-up (outstanding messages are lost after `loss_timeout`); read only when idle.
    let mut silent_since: Option<Instant> = None;
    let mut waiting_since: Option<Instant> = None;
    while win.completed < goal {
        // Send only what is still needed, so that none is outstanding when the goal is met.
        let room = win.w - (win.next - win.lo);
        let wanted = (goal - win.completed).saturating_sub(win.outstanding());
        let n = room.min(wanted);
        if n > 0 {
            win.next += lane.send(win.next..win.next + n)?;
        }
        if lane.poll(|seq| win.answer(seq))? > 0 {
            idle = 0;
            silent_since = None;
            waiting_since = None;
            continue;
        }
        idle = idle.wrapping_add(1);
        if !idle.is_multiple_of(POLLS_PER_LOOK) {
            std::hint::spin_loop();
            continue;
        }
        let now = Instant::now();
        if now - *silent_since.get_or_insert(now) >= opts.timeout {
            return Err(PingPongError::Timeout(opts.timeout));
        }
        if L::LOSSY && now - *waiting_since.get_or_insert(now) >= opts.loss_timeout && win.outstanding() > 0 {
            win.give_up();
            waiting_since = None;
        }
    }
    Ok(())
}

/// The server's CPU clock (ns), asked in band with nothing outstanding; `None` when the server
/// does not report (or, over udp, every question or answer was lost).
fn report<L: Lane>(lane: &mut L, win: &mut Window, opts: PipelineOptions) -> Result<Option<u64>, PingPongError> {
    let seq = win.take_one();
    let (tries, wait) = if L::LOSSY { (REPORT_TRIES, opts.loss_timeout) } else { (1, opts.timeout) };
    for _ in 0..tries {
        lane.ask(seq)?;
        let start = Instant::now();
        while start.elapsed() < wait {
            match lane.answer(seq, &mut win.late)? {
                Some(Answer::Cpu(ns)) => return Ok(Some(ns)),
                Some(Answer::Echoed) => return Ok(None),
                Some(Answer::Other) | None => std::hint::spin_loop(),
            }
        }
    }
    if L::LOSSY {
        Ok(None)
    } else {
        Err(PingPongError::Timeout(opts.timeout))
    }
}

/// The shared-memory floor: rings of one-line records, data then flag.
struct ShmFloorLane {
    end: RingEnd,
    pattern: Pattern,
    /// The last message whose echo was taken (echoes come in order).
    rx: u64,
    /// Keeps the exchange alive: the echoer stops when it hangs up.
    _sock: UnixStream,
}

impl Lane for ShmFloorLane {
    const LOSSY: bool = false;

    #[inline]
    fn send(&mut self, seqs: Range<u64>) -> Result<u64, PingPongError> {
        let n = seqs.end - seqs.start;
        for seq in seqs {
            // The record's payload is the message less its sequence word, which is the flag.
            let m = self.pattern.stamp(seq);
            self.end.send(seq, seq, &m[8..]);
        }
        Ok(n)
    }

    #[inline]
    fn poll(&mut self, mut answer: impl FnMut(u64) -> Result<(), PingPongError>) -> Result<usize, PingPongError> {
        let mut n = 0;
        loop {
            let seq = self.rx + 1;
            let word = self.end.peer_word(seq);
            if word != seq {
                // The record still holds its echo from a lap before (or nothing yet).
                let lap_before = seq.saturating_sub(self.end.records() as u64);
                if word & !REPORT_BIT != lap_before {
                    return Err(PingPongError::Mismatch(format!("echo {word:#x} where {seq} belongs")));
                }
                return Ok(n);
            }
            if self.end.received(seq) != &self.pattern.msg[8..] {
                return Err(PingPongError::Mismatch(format!("the echo of message {seq} came back altered")));
            }
            self.rx = seq;
            answer(seq)?;
            n += 1;
        }
    }

    fn ask(&mut self, seq: u64) -> Result<(), PingPongError> {
        self.end.send(seq, seq | REPORT_BIT, &[]);
        Ok(())
    }

    fn answer(&mut self, seq: u64, _late: &mut u64) -> Result<Option<Answer>, PingPongError> {
        if self.end.peer_word(seq) != seq | REPORT_BIT {
            return Ok(None);
        }
        self.rx = seq;
        Ok(Some(Answer::Cpu(self.end.reported(seq))))
    }
}

/// Reads a received message: an echo handed to `answer`, or a report's answer returned.
#[inline]
fn take(
    pattern: &Pattern,
    m: &[u8],
    answer: &mut impl FnMut(u64) -> Result<(), PingPongError>,
) -> Result<Option<Answer>, PingPongError> {
    match cpu_report::parse(m) {
        Answer::Other => answer(pattern.check(m)?).map(|()| None),
        a => Ok(Some(a)),
    }
}

/// An answer to a report, or (counted late) an echo met while waiting for it.
fn take_report(pattern: &Pattern, m: &[u8], late: &mut u64) -> Result<Option<Answer>, PingPongError> {
    take(pattern, m, &mut |_| {
        *late += 1;
        Ok(())
    })
}

/// The udp floor: a connected socket, `sendmmsg` and `recvmmsg`.
struct UdpFloorLane {
    sock: UdpSocket,
    out: Batch,
    inbox: Batch,
    pattern: Pattern,
}

impl Lane for UdpFloorLane {
    const LOSSY: bool = true;

    fn send(&mut self, seqs: Range<u64>) -> Result<u64, PingPongError> {
        let n = (seqs.end - seqs.start).min(self.out.capacity() as u64) as usize;
        for i in 0..n {
            let m = self.pattern.stamp(seqs.start + i as u64);
            self.out.slot_mut(i)[..m.len()].copy_from_slice(m);
            let len = m.len();
            self.out.set_len(i, len);
        }
        // A full socket buffer sends fewer, or none: the rest go on a later turn.
        let sent = self.out.send(self.sock.as_raw_fd(), 0..n).map_err(io_err("send"))?;
        Ok(sent as u64)
    }

    fn poll(&mut self, mut answer: impl FnMut(u64) -> Result<(), PingPongError>) -> Result<usize, PingPongError> {
        let n = refused_is_lost(self.inbox.recv(self.sock.as_raw_fd()))?;
        for i in 0..n {
            // A report's answer here is one that came after its question was asked again.
            take(&self.pattern, self.inbox.get(i), &mut answer)?;
        }
        Ok(n)
    }

    fn ask(&mut self, _seq: u64) -> Result<(), PingPongError> {
        match self.sock.send(&cpu_report::ASK) {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(io_err("send")(e)),
            _ => Ok(()),
        }
    }

    fn answer(&mut self, _seq: u64, late: &mut u64) -> Result<Option<Answer>, PingPongError> {
        let n = refused_is_lost(self.inbox.recv(self.sock.as_raw_fd()))?;
        let mut got = None;
        for i in 0..n {
            got = take_report(&self.pattern, self.inbox.get(i), late)?.or(got);
        }
        Ok(got)
    }
}

/// A receive's count, none when an earlier datagram was refused: a floor server answers one
/// client at a time (its socket is connected), so a datagram may be refused while it still
/// serves the one before; it is lost like any other, and a server that never answers ends the
/// run at its timeout.
fn refused_is_lost(r: io::Result<usize>) -> Result<usize, PingPongError> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(0),
        r => r.map_err(io_err("receive")),
    }
}

/// A socket transport of lowlat's as a lane carries frames: UDP (which may lose them) and TCP.
trait Frames {
    const LOSSY: bool;
    fn send(&mut self, frame: &[u8]) -> io::Result<()>;
    /// The next frame's length in `buf`, without waiting.
    fn try_recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<usize>>;
}

impl Frames for UdpChannel {
    const LOSSY: bool = true;
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        UdpChannel::send(self, frame, &[])
    }
    fn try_recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
        UdpChannel::try_recv(self, buf)
    }
}

impl Frames for TcpChannel {
    const LOSSY: bool = false;
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        TcpChannel::send(self, frame, &[])
    }
    fn try_recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
        Ok(TcpChannel::try_recv(self, buf)?.map(|()| buf.len()))
    }
}

/// lowlat's UDP or TCP transport, no RPC.
struct FrameLane<C> {
    ch: C,
    buf: Vec<u8>,
    pattern: Pattern,
}

impl<C: Frames> Lane for FrameLane<C> {
    const LOSSY: bool = C::LOSSY;

    fn send(&mut self, seqs: Range<u64>) -> Result<u64, PingPongError> {
        let n = seqs.end - seqs.start;
        for seq in seqs {
            self.ch.send(self.pattern.stamp(seq)).map_err(io_err("send"))?;
        }
        Ok(n)
    }

    fn poll(&mut self, mut answer: impl FnMut(u64) -> Result<(), PingPongError>) -> Result<usize, PingPongError> {
        let mut n = 0;
        while let Some(len) = self.ch.try_recv(&mut self.buf).map_err(io_err("receive"))? {
            take(&self.pattern, &self.buf[..len], &mut answer)?;
            n += 1;
        }
        Ok(n)
    }

    fn ask(&mut self, _seq: u64) -> Result<(), PingPongError> {
        self.ch.send(&cpu_report::ASK).map_err(io_err("send"))
    }

    fn answer(&mut self, _seq: u64, late: &mut u64) -> Result<Option<Answer>, PingPongError> {
        match self.ch.try_recv(&mut self.buf).map_err(io_err("receive"))? {
            Some(len) => take_report(&self.pattern, &self.buf[..len], late),
            None => Ok(None),
        }
    }
}

/// lowlat's shared-memory rings (`ShmChannel`), no RPC: records in order.
struct ShmLane {
    ch: ShmChannel,
    pattern: Pattern,
}

fn shm_err(op: &'static str) -> impl FnOnce(lowlat_shm::ShmError) -> PingPongError {
    move |e| PingPongError::Io { op: op.into(), source: io::Error::other(e.to_string()) }
}

impl Lane for ShmLane {
    const LOSSY: bool = false;

    fn send(&mut self, seqs: Range<u64>) -> Result<u64, PingPongError> {
        let mut sent = 0;
        for seq in seqs {
            let m = self.pattern.stamp(seq);
            // Written in place, never waiting: a full call ring sends the rest on a later turn,
            // after the echoes that free it have been taken.
            let fill =
                |dst: &mut [u8]| (dst.len() >= m.len()).then(|| dst[..m.len()].copy_from_slice(m)).map(|()| m.len());
            if self.ch.send_in_place(fill).map_err(shm_err("send"))?.is_none() {
                break;
            }
            sent += 1;
        }
        Ok(sent)
    }

    fn poll(&mut self, mut answer: impl FnMut(u64) -> Result<(), PingPongError>) -> Result<usize, PingPongError> {
        let mut n = 0;
        while let Some(m) = self.ch.try_recv().map_err(shm_err("receive"))? {
            take(&self.pattern, m, &mut answer)?;
            n += 1;
        }
        Ok(n)
    }

    fn ask(&mut self, _seq: u64) -> Result<(), PingPongError> {
        self.ch.send_within(&[&cpu_report::ASK], Duration::from_secs(5)).map_err(shm_err("send"))
    }

    fn answer(&mut self, _seq: u64, late: &mut u64) -> Result<Option<Answer>, PingPongError> {
        match self.ch.try_recv().map_err(shm_err("receive"))? {
            Some(m) => take_report(&self.pattern, m, late),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_matches_answers_in_and_out_of_order() {
        let mut w = Window::new(4);
        w.next = 5; // messages 1-4 sent
        w.answer(1).unwrap();
        w.answer(3).unwrap();
        assert_eq!((w.lo, w.holes, w.outstanding()), (2, 1, 2));
        assert!(w.answer(3).unwrap_err().to_string().contains("twice"));
        assert!(w.answer(9).unwrap_err().to_string().contains("not sent"));
        w.answer(2).unwrap();
        assert_eq!((w.lo, w.holes, w.completed), (4, 0, 3));
        w.give_up();
        assert_eq!((w.lo, w.lost, w.outstanding()), (5, 1, 0));
        w.answer(4).unwrap();
        assert_eq!((w.late, w.completed), (1, 3));
        assert!(w.answer(4).unwrap_err().to_string().contains("twice"), "late once, then a duplicate");
        assert!(w.answer(1).unwrap_err().to_string().contains("twice"));
        assert_eq!(w.take_one(), 5);
        assert_eq!((w.lo, w.next), (6, 6));
    }

    #[test]
    fn echoes_are_checked_against_the_pattern() {
        let mut p = Pattern::new(16);
        let m = p.stamp(7).to_vec();
        assert_eq!(p.check(&m).unwrap(), 7);
        let mut bad = m.clone();
        bad[12] ^= 1;
        assert!(p.check(&bad).is_err());
        assert!(p.check(&m[..15]).is_err());
    }

    #[test]
    fn bad_arguments_are_typed_errors() {
        let o = PipelineOptions::default();
        assert!(matches!(run_pipelined("udp://127.0.0.1:9", 32, 10, 0, o), Err(PingPongError::InFlight { .. })));
        assert!(matches!(
            run_pipelined("udp://127.0.0.1:9", 32, 10, MAX_IN_FLIGHT + 1, o),
            Err(PingPongError::InFlight { .. })
        ));
        assert!(matches!(run_pipelined("udp://127.0.0.1:9", 4, 10, 1, o), Err(PingPongError::Size { .. })));
        assert!(matches!(run_pipelined("onc+udp://127.0.0.1:9", 32, 10, 1, o), Err(PingPongError::Unsupported(_))));
        let floor = PipelineOptions { floor: true, ..o };
        assert!(matches!(run_pipelined("tcp://127.0.0.1:9", 32, 10, 1, floor), Err(PingPongError::NoFloor(_))));
        assert!(matches!(run_pipelined("shm:///tmp/none", 72, 10, 1, floor), Err(PingPongError::Size { .. })));
    }
}
