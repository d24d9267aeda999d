//! The machine's floor for shared memory: the simplest exchange two processes can make, and the
//! figure lowlat's own ring exchange and RPC are measured against (DESIGN principle 10).
//!
//! Each direction has a mailbox of whole cache lines. A message of `size` bytes (a multiple of
//! 8) fills `size / 64` lines, rounded up; its last 8 bytes are its sequence word, written last
//! with release ordering (data then flag, as in ShrimpRPC's mapped buffers), so a 32-byte
//! message is one line and a 1 KiB message sixteen, its sequence word in the last line written.
//! Both sides spin on the sequence word with the pause hint; the echoer copies the message from
//! one mailbox to the other. No ring, no lengths, no wake-ups: what the hardware allows, not
//! lowlat's mechanism.
//!
//! `lowlat pingpong --floor --serve shm://PATH` listens at PATH; `lowlat pingpong --floor
//! shm://PATH --size 32` connects, says the size ([`Request`]) and receives a fresh sealed memfd
//! holding the two mailboxes. The client checks every echo: a round whose answer is not the
//! message it sent fails the run.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lowlat_shm::listen::{listen, remove_if_ours};
use lowlat_shm::ShmError;
use lowlat_sys::{self as sys, Mapping};

use super::shm_floor_ring::{check_shape, RingEnd, Side as RingSide};

fn io_err(op: &'static str) -> impl FnOnce(io::Error) -> ShmError {
    move |source| ShmError::Io { op, source }
}

/// The largest message of a floor exchange.
pub const MAX_FLOOR_MESSAGE: usize = 64 << 10;
/// The smallest: the sequence word alone.
pub const MIN_FLOOR_MESSAGE: usize = 8;
/// Bytes of the shared segment: one mailbox per direction.
const SEGMENT: usize = 2 * MAX_FLOOR_MESSAGE;
/// Spins between looks at the clock (client) or at the stop flag and the socket (echoer).
const CHECK_EVERY: u32 = 1 << 12;

/// The client's only message on the Unix socket: the size of the messages to exchange, and
/// whether they go one at a time through the mailboxes or pipelined through rings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Bytes of every message exchanged, the sequence word included
    /// ([`MIN_FLOOR_MESSAGE`] to [`MAX_FLOOR_MESSAGE`]; at most one record through rings).
    pub size: u32,
    /// 0: one message each way through the mailboxes; else records of each ring of the
    /// pipelined exchange ([`super::shm_floor_ring`]).
    pub records: u16,
}

const MAGIC: &[u8; 4] = b"LlFl";
const VERSION: u16 = 1;
/// Bytes of a [`Request`] and of the echoer's answer on the Unix socket.
pub const HANDSHAKE_LEN: usize = 12;

impl Request {
    /// The request as sent: magic `LlFl`, version (u16 LE), records (u16 LE; zero bytes for
    /// the mailboxes, as clients that knew no rings sent), size (u32 LE).
    pub fn encode(&self) -> [u8; HANDSHAKE_LEN] {
        let mut b = [0u8; HANDSHAKE_LEN];
        b[0..4].copy_from_slice(MAGIC);
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[6..8].copy_from_slice(&self.records.to_le_bytes());
        b[8..12].copy_from_slice(&self.size.to_le_bytes());
        b
    }

    /// Reads a request, checking the size is one a floor exchange can carry.
    pub fn decode(b: &[u8]) -> Result<Request, &'static str> {
        if b.len() != HANDSHAKE_LEN || &b[0..4] != MAGIC {
            return Err("not a lowlat floor client");
        }
        if u16::from_le_bytes([b[4], b[5]]) != VERSION {
            return Err("unsupported floor handshake version");
        }
        let records = u16::from_le_bytes([b[6], b[7]]);
        let size = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
        if records == 0 {
            check_size(size as usize)?;
        } else {
            check_shape(records as usize, size as usize)?;
        }
        Ok(Request { size, records })
    }
}

fn check_size(size: usize) -> Result<(), &'static str> {
    if size & 7 != 0 || !(MIN_FLOOR_MESSAGE..=MAX_FLOOR_MESSAGE).contains(&size) {
        return Err("floor message size must be a multiple of 8 from 8 bytes to 64 KiB");
    }
    Ok(())
}

/// One side's view of the two mailboxes.
#[derive(Debug)]
pub struct FloorEnd {
    /// Where this side writes.
    out: NonNull<u8>,
    /// Where the peer writes.
    inbox: NonNull<u8>,
    size: usize,
    _map: Mapping,
}

// SAFETY: the pointers lead into `_map`, which the end owns; nothing in it is tied to a thread.
unsafe impl Send for FloorEnd {}

/// Which mailbox a side writes: the client the first, the echoer the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Writes the first mailbox, reads the second.
    Client,
    /// Writes the second mailbox, reads the first.
    Echoer,
}

impl FloorEnd {
    /// Maps a floor segment for `side`, exchanging messages of `size` bytes.
    pub fn map(fd: &OwnedFd, side: Side, size: usize) -> io::Result<FloorEnd> {
        check_size(size).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        if !sys::check_sealed(fd, SEGMENT)? {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "floor segment not sealed or of the wrong size"));
        }
        let map = Mapping::new(fd, 0, SEGMENT, false)?;
        let base = NonNull::new(map.as_ptr()).ok_or(io::ErrorKind::InvalidData)?;
        // SAFETY: both mailboxes lie inside the `SEGMENT` bytes just mapped.
        let second = unsafe { base.add(MAX_FLOOR_MESSAGE) };
        let (out, inbox) = match side {
            Side::Client => (base, second),
            Side::Echoer => (second, base),
        };
        Ok(FloorEnd { out, inbox, size, _map: map })
    }

    /// A fresh segment (all zero, sealed) and the echoer's end of it.
    pub fn create(size: usize) -> io::Result<(FloorEnd, OwnedFd)> {
        let fd = sys::sealed_memfd("lowlat-floor", SEGMENT)?;
        let end = FloorEnd::map(&fd, Side::Echoer, size)?;
        Ok((end, fd))
    }

    /// Bytes of each message (sequence word included).
    pub fn size(&self) -> usize {
        self.size
    }

    fn sequence(&self, mailbox: NonNull<u8>) -> &AtomicU64 {
        // SAFETY: the last 8 bytes of a message inside a page-aligned mailbox of
        // `MAX_FLOOR_MESSAGE >= size` bytes, 8-aligned as `size` is a multiple of 8; only ever
        // accessed atomically, by both processes.
        unsafe { AtomicU64::from_ptr(mailbox.as_ptr().add(self.size - 8).cast::<u64>()) }
    }

    /// The payload the peer wrote (the message less its sequence word). Untrusted bytes: a
    /// peer could change them while they are read.
    pub fn received(&self) -> &[u8] {
        // SAFETY: `size - 8` bytes at the start of the peer's mailbox, inside the mapping that
        // lives as long as `self`; by the exchange's protocol the peer does not write them until
        // it has our answer.
        unsafe { std::slice::from_raw_parts(self.inbox.as_ptr(), self.size - 8) }
    }

    /// Writes `payload` (`size - 8` bytes) into our mailbox, then `seq`, last.
    pub fn send(&mut self, payload: &[u8], seq: u64) {
        assert_eq!(payload.len(), self.size - 8, "a floor message has a fixed size");
        // SAFETY: our mailbox has room for `size - 8` bytes before the sequence word; the peer
        // reads them only after seeing `seq`, published below with release ordering.
        unsafe { std::ptr::copy_nonoverlapping(payload.as_ptr(), self.out.as_ptr(), payload.len()) };
        self.sequence(self.out).store(seq, Ordering::Release);
    }

    /// Sends back what the peer sent, with its sequence number: one echo, straight from one
    /// mailbox into the other.
    pub fn echo(&mut self, seq: u64) {
        // SAFETY: the two mailboxes do not overlap; each has `size - 8` payload bytes.
        unsafe { std::ptr::copy_nonoverlapping(self.inbox.as_ptr(), self.out.as_ptr(), self.size - 8) };
        self.sequence(self.out).store(seq, Ordering::Release);
    }

    /// Spins (with the pause hint) until the peer's sequence word is no longer `last`; calls
    /// `give_up` every few thousand spins and returns `None` if it says so.
    #[inline]
    pub fn wait_past(&self, last: u64, mut give_up: impl FnMut() -> bool) -> Option<u64> {
        let word = self.sequence(self.inbox);
        let mut spins = 0u32;
        loop {
            let seq = word.load(Ordering::Acquire);
            if seq != last {
                return Some(seq);
            }
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins & (CHECK_EVERY - 1) == 0 && give_up() {
                return None;
            }
        }
    }
}

/// Echoes floor exchanges for clients connecting at `path`, one at a time, until `stop` is set.
pub fn serve(path: &Path, stop: &AtomicBool) -> Result<(), ShmError> {
    FloorServer::bind(path)?.serve(stop)
}

/// A floor echoer's listening socket, bound (so clients may connect as soon as this returns)
/// but not yet serving.
pub struct FloorServer {
    listener: std::os::unix::net::UnixListener,
    file_id: (u64, u64),
    path: std::path::PathBuf,
}

impl FloorServer {
    /// Binds the socket at `path`.
    pub fn bind(path: &Path) -> Result<FloorServer, ShmError> {
        let (listener, file_id) = listen(path, 0o600)?;
        listener.set_nonblocking(true).map_err(io_err("listen"))?;
        Ok(FloorServer { listener, file_id, path: path.to_path_buf() })
    }

    /// Echoes floor exchanges, one client at a time, until `stop` is set; then removes the
    /// socket file.
    pub fn serve(self, stop: &AtomicBool) -> Result<(), ShmError> {
        let listener = &self.listener;
        let served = (|| {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    // A client that breaks the protocol or goes away ends its own exchange only.
                    Ok((sock, _)) => {
                        let _ = echo_client(sock, stop);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        let _ = lowlat_sys::poll_readable(&[listener.as_raw_fd()], Some(Duration::from_millis(50)));
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(ShmError::Io { op: "accept", source: e }),
                }
            }
            Ok(())
        })();
        remove_if_ours(&self.path, self.file_id);
        served
    }
}

fn echo_client(sock: UnixStream, stop: &AtomicBool) -> Result<(), ShmError> {
    sock.set_read_timeout(Some(Duration::from_secs(5))).map_err(io_err("floor handshake"))?;
    let mut buf = [0u8; HANDSHAKE_LEN + 1];
    let (n, _) = sys::recv_with_fds(sock.as_raw_fd(), &mut buf).map_err(io_err("floor handshake"))?;
    let req = Request::decode(&buf[..n]).map_err(|what| ShmError::Handshake { what })?;
    let sock_fd = sock.as_raw_fd();
    let mut looks = 0u32;
    let mut give_up = || {
        // The socket is looked at less often than the flag: it costs a system call.
        looks = looks.wrapping_add(1);
        stop.load(Ordering::Relaxed) || (looks & 7 == 0 && sys::hung_up(sock_fd))
    };
    if req.records > 0 {
        let (mut ring, fd) =
            RingEnd::create(req.records as usize, req.size as usize).map_err(io_err("floor ring segment"))?;
        sys::send_with_fds(sock_fd, &req.encode(), &[fd.as_raw_fd()]).map_err(io_err("floor handshake"))?;
        drop(fd);
        return ring.echo(give_up).map_err(ShmError::Broken);
    }
    let (mut end, fd) = FloorEnd::create(req.size as usize).map_err(io_err("floor segment"))?;
    sys::send_with_fds(sock_fd, &req.encode(), &[fd.as_raw_fd()]).map_err(io_err("floor handshake"))?;
    drop(fd);
    let mut last = 0u64;
    while let Some(seq) = end.wait_past(last, &mut give_up) {
        if seq != last.wrapping_add(1) {
            return Err(ShmError::Broken(format!("floor client skipped from sequence {last} to {seq}")));
        }
        end.echo(seq);
        last = seq;
    }
    Ok(())
}

/// Asks the echoer at `path` for the exchange `req` names; returns the segment it handed over
/// and the socket that keeps the exchange alive (the echoer stops when it hangs up).
fn handshake(path: &Path, req: Request, timeout: Duration) -> Result<(OwnedFd, UnixStream), ShmError> {
    let sock = UnixStream::connect(path).map_err(io_err("connect"))?;
    sock.set_read_timeout(Some(timeout)).map_err(io_err("connect"))?;
    sys::send_with_fds(sock.as_raw_fd(), &req.encode(), &[]).map_err(io_err("floor handshake"))?;
    let mut buf = [0u8; HANDSHAKE_LEN + 1];
    let (n, fds) = sys::recv_with_fds(sock.as_raw_fd(), &mut buf).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ShmError::Timeout { op: "connect" },
        _ => ShmError::Io { op: "floor handshake", source: e },
    })?;
    if n == 0 {
        return Err(ShmError::Handshake { what: "the floor echoer closed the connection" });
    }
    if Request::decode(&buf[..n]) != Ok(req) {
        return Err(ShmError::Handshake { what: "the floor echoer answered another exchange" });
    }
    let [fd]: [OwnedFd; 1] = fds.try_into().map_err(|_| ShmError::Handshake { what: "expected one memfd" })?;
    Ok((fd, sock))
}

/// Connects to a floor echoer at `path` for the pipelined exchange: rings of `records` records,
/// messages of `size` bytes. Returns the client's end of the rings and the socket that keeps
/// the exchange alive.
pub fn connect_ring(
    path: &Path,
    records: usize,
    size: usize,
    timeout: Duration,
) -> Result<(RingEnd, UnixStream), ShmError> {
    check_shape(records, size).map_err(|what| ShmError::Handshake { what })?;
    let (fd, sock) = handshake(path, Request { size: size as u32, records: records as u16 }, timeout)?;
    let end = RingEnd::map(&fd, RingSide::Client, records, size).map_err(io_err("floor ring segment"))?;
    Ok((end, sock))
}

/// The client's side of one exchange of `size`-byte messages.
pub struct FloorClient {
    end: FloorEnd,
    /// The payload of the next message; its first 8 bytes carry the round, so no two echoes
    /// are alike.
    payload: Vec<u8>,
    seq: u64,
    /// Keeps the exchange alive: the echoer stops when it hangs up.
    _sock: UnixStream,
}

impl FloorClient {
    /// Connects to a floor echoer at `path` for messages of `size` bytes.
    pub fn connect(path: &Path, size: usize, timeout: Duration) -> Result<FloorClient, ShmError> {
        check_size(size).map_err(|what| ShmError::Handshake { what })?;
        let (fd, sock) = handshake(path, Request { size: size as u32, records: 0 }, timeout)?;
        let end = FloorEnd::map(&fd, Side::Client, size).map_err(io_err("floor segment"))?;
        Ok(FloorClient::over(end, sock))
    }

    fn over(end: FloorEnd, sock: UnixStream) -> FloorClient {
        let payload = (0..end.size() - 8).map(|i| i as u8).collect();
        FloorClient { end, payload, seq: 0, _sock: sock }
    }

    /// One round trip, bounded by `timeout`: sends the next message, waits for its echo and
    /// checks it is the message sent. Returns how long it took.
    #[inline]
    pub fn round(&mut self, timeout: Duration) -> Result<Duration, ShmError> {
        self.seq += 1;
        let seq = self.seq;
        let stamp = seq.to_le_bytes();
        let n = stamp.len().min(self.payload.len());
        self.payload[..n].copy_from_slice(&stamp[..n]);
        let t = Instant::now();
        self.end.send(&self.payload, seq);
        let got = self.end.wait_past(seq - 1, || t.elapsed() > timeout);
        // Read what came back, as any receiver of a message must.
        let intact = got == Some(seq) && self.end.received() == &self.payload[..];
        let took = t.elapsed();
        match got {
            None => Err(ShmError::Timeout { op: "floor round trip" }),
            Some(s) if s != seq => Err(ShmError::Broken(format!("floor echo carried sequence {s}, sent {seq}"))),
            _ if !intact => Err(ShmError::Broken(format!("floor echo of {} bytes came back altered", self.end.size()))),
            _ => Ok(took),
        }
    }
}

/// Connects to a floor echoer at `path` and makes `rounds` round trips of `size` bytes, each
/// bounded by `timeout`; returns each round trip's latency.
pub fn run(path: &Path, size: usize, rounds: usize, timeout: Duration) -> Result<Vec<Duration>, ShmError> {
    let mut c = FloorClient::connect(path, size, timeout)?;
    (0..rounds).map(|_| c.round(timeout)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client and an echoer end over one segment, in this process.
    fn pair(size: usize) -> (FloorClient, FloorEnd) {
        let (echoer, fd) = FloorEnd::create(size).unwrap();
        let client = FloorEnd::map(&fd, Side::Client, size).unwrap();
        let (a, _b) = UnixStream::pair().unwrap();
        (FloorClient::over(client, a), echoer)
    }

    /// Runs `rounds` client rounds against an echoer thread that answers with `answer`.
    fn exchange(size: usize, rounds: usize, answer: fn(&mut FloorEnd, u64)) -> Result<(), ShmError> {
        let (mut client, mut echoer) = pair(size);
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let t = std::thread::spawn(move || {
            let mut last = 0;
            while let Some(seq) = echoer.wait_past(last, || stop2.load(Ordering::Relaxed)) {
                answer(&mut echoer, seq);
                last = seq;
            }
        });
        let r = (0..rounds).try_for_each(|_| client.round(Duration::from_secs(5)).map(drop));
        stop.store(true, Ordering::Relaxed);
        t.join().unwrap();
        r
    }

    #[test]
    fn echoes_of_every_size_come_back_checked() {
        for size in [8, 32, 64, 1024, MAX_FLOOR_MESSAGE] {
            exchange(size, 500, FloorEnd::echo).unwrap_or_else(|e| panic!("{size} bytes: {e}"));
        }
    }

    #[test]
    fn a_wrong_echo_fails_the_round() {
        // One byte altered.
        let e = exchange(32, 10, |end, seq| {
            let mut p = end.received().to_vec();
            p[3] ^= 1;
            end.send(&p, seq);
        })
        .unwrap_err();
        assert!(e.to_string().contains("came back altered"), "{e}");
        // The previous message again, under the new sequence number.
        let e = exchange(1024, 10, |end, seq| {
            let mut p = end.received().to_vec();
            p[..8].copy_from_slice(&(seq - 1).to_le_bytes());
            end.send(&p, seq);
        })
        .unwrap_err();
        assert!(e.to_string().contains("came back altered"), "{e}");
        // Another sequence number.
        let e = exchange(32, 10, |end, seq| end.echo(seq + 1)).unwrap_err();
        assert!(e.to_string().contains("sequence"), "{e}");
    }

    #[test]
    fn requests_are_checked() {
        let r = Request { size: 1024, records: 0 };
        assert_eq!(Request::decode(&r.encode()), Ok(r));
        let r = Request { size: 64, records: 256 };
        assert_eq!(Request::decode(&r.encode()), Ok(r));
        for bad in [0, 4, 12, MAX_FLOOR_MESSAGE as u32 + 8] {
            assert!(Request::decode(&Request { size: bad, records: 0 }.encode()).is_err(), "{bad}");
        }
        for (size, records) in [(72, 64), (32, 3), (32, 8192)] {
            assert!(Request::decode(&Request { size, records }.encode()).is_err(), "{size} {records}");
        }
        assert!(Request::decode(b"LlShxxxxxxxx").is_err());
    }

    #[test]
    fn a_floor_server_echoes_a_process_and_outlives_it() {
        let dir = std::env::temp_dir().join(format!("llshm-floor-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s");
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        // Once bound, a client may connect at once, before the echoer serves (what a process
        // that says "ready" after connection promises; the lab's ladder relies on it).
        let bound = FloorServer::bind(&path).unwrap();
        let early = {
            let path = path.clone();
            std::thread::spawn(move || run(&path, 32, 100, Duration::from_secs(5)))
        };
        std::thread::sleep(Duration::from_millis(50));
        let server = {
            let stop = stop.clone();
            std::thread::spawn(move || bound.serve(&stop))
        };
        assert_eq!(early.join().unwrap().expect("a client that connected before serving began is echoed").len(), 100);
        // Two clients one after the other: the first's hang-up ends its exchange only.
        for size in [32, 1024] {
            let v = run(&path, size, 1000, Duration::from_secs(5)).unwrap();
            assert_eq!(v.len(), 1000);
        }
        assert!(matches!(run(&path, 12, 1, Duration::from_secs(1)), Err(ShmError::Handshake { .. })));
        stop.store(true, Ordering::Relaxed);
        server.join().unwrap().unwrap();
        assert!(!path.exists(), "the socket file was removed");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
