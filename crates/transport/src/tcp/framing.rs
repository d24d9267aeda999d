//! Cutting a byte stream into frames: the [`Framing`] a connection reads with, lowlat's own
//! ([`LengthPrefix`]), and writing a frame with as few system calls as possible (what the socket
//! does not take is queued by the caller).

use std::io::{self, IoSlice, Read, Write};
use std::net::TcpStream;

/// Bytes of the length prefix.
pub const PREFIX: usize = 4;

/// Why a stream of frames could not be read.
fn bad_frame(len: usize, max: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("peer sent a {len}-byte frame, larger than the {max}-byte maximum"),
    )
}

/// How a byte stream is cut into frames, for one connection: reading (the state of a frame in
/// progress) and the header written before each fragment sent.
pub trait Framing: Clone + Send + 'static {
    /// Reads what `sock` has and returns the next frame, copied into `out`. `Ok(None)`: no
    /// complete frame yet. `UnexpectedEof`: the peer closed. `InvalidData`: the peer broke the
    /// framing (a frame larger than the maximum), and the stream cannot be read further.
    fn next(&mut self, sock: &mut TcpStream, out: &mut Vec<u8>) -> io::Result<Option<()>>;
    /// The next frame among the bytes already read, copied into `out`, without reading the
    /// socket: for a server whose epoll (level-triggered) reports the socket again when it has
    /// more, so that the frames behind one are taken without a read that finds nothing.
    fn buffered(&mut self, out: &mut Vec<u8>) -> io::Result<Option<()>>;
    /// Bytes the reader holds beyond a read's worth (its buffer grown for a large frame).
    fn held(&self) -> usize;
    /// Gives back what the reader holds beyond a read's worth, unless a frame in progress
    /// needs it (then nothing is given back; try again after the frame).
    fn trim(&mut self);
    /// Largest frame read.
    fn max_frame(&self) -> usize;
    /// The header before a fragment of `len` bytes; `last`: the fragment ends its frame.
    fn header(&self, len: usize, last: bool) -> [u8; PREFIX];
    /// Largest fragment a channel sends (a larger frame goes in several): unbounded unless the
    /// framing has fragments.
    fn max_fragment(&self) -> usize {
        usize::MAX
    }
}

/// Bytes a connection reads at a time; its buffer holds at least this much.
pub const READ_AHEAD: usize = 64 * 1024;

/// lowlat's framing: each frame after its length (u32, little-endian), frames of at most `max`
/// bytes.
#[derive(Clone, Debug)]
pub struct LengthPrefix {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max: usize,
}

impl LengthPrefix {
    /// A reader of frames of at most `max` bytes (a larger one breaks the stream: `InvalidData`).
    pub fn new(max: usize) -> LengthPrefix {
        LengthPrefix { buf: Vec::new(), start: 0, end: 0, max }
    }

    /// The next complete frame's range in `buf`, if one is buffered.
    fn complete(&self, max: usize) -> io::Result<Option<(usize, usize)>> {
        let avail = self.end - self.start;
        if avail < PREFIX {
            return Ok(None);
        }
        let mut p = [0u8; PREFIX];
        p.copy_from_slice(&self.buf[self.start..self.start + PREFIX]);
        let len = u32::from_le_bytes(p) as usize;
        if len > max {
            return Err(bad_frame(len, max));
        }
        if avail < PREFIX + len {
            return Ok(None);
        }
        Ok(Some((self.start + PREFIX, len)))
    }
}

impl Framing for LengthPrefix {
    fn next(&mut self, sock: &mut TcpStream, out: &mut Vec<u8>) -> io::Result<Option<()>> {
        loop {
            if self.buffered(out)?.is_some() {
                return Ok(Some(()));
            }
            // Make room: move the partial frame to the front, grow towards a whole one.
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let want = if self.end >= PREFIX {
                let mut p = [0u8; PREFIX];
                p.copy_from_slice(&self.buf[..PREFIX]);
                PREFIX + u32::from_le_bytes(p) as usize
            } else {
                PREFIX + READ_AHEAD
            };
            // With what arrives, at most doubling: a prefix claiming megabytes makes us hold no
            // more than twice what its peer has sent (a 4-byte prefix used to zero the whole
            // frame), and a large frame still comes in few reads.
            let len = want.min(self.end + self.end.max(READ_AHEAD)).max(PREFIX + READ_AHEAD);
            if self.buf.len() < len {
                self.buf.resize(len, 0);
            }
            match sock.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "peer closed the connection")),
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn buffered(&mut self, out: &mut Vec<u8>) -> io::Result<Option<()>> {
        let Some((at, len)) = self.complete(self.max)? else { return Ok(None) };
        out.clear();
        out.extend_from_slice(&self.buf[at..at + len]);
        self.start = at + len;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Ok(Some(()))
    }

    fn held(&self) -> usize {
        self.buf.capacity().saturating_sub(PREFIX + READ_AHEAD)
    }

    fn trim(&mut self) {
        if self.end == 0 {
            self.buf.truncate(PREFIX + READ_AHEAD);
            self.buf.shrink_to_fit();
        }
    }

    fn max_frame(&self) -> usize {
        self.max
    }

    fn header(&self, len: usize, _last: bool) -> [u8; PREFIX] {
        // Never split (`max_fragment` is unbounded): every fragment is a whole frame.
        (len as u32).to_le_bytes()
    }
}

/// Writes `prefix + head + body` with as few system calls as possible; returns bytes written.
pub(super) fn write_frame(
    sock: &mut TcpStream,
    prefix: &[u8; PREFIX],
    head: &[u8],
    body: &[u8],
    skip: usize,
) -> io::Result<usize> {
    let parts = [&prefix[..], head, body];
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let mut done = skip;
    while done < total {
        let mut iov: [IoSlice; 3] = [IoSlice::new(&[]), IoSlice::new(&[]), IoSlice::new(&[])];
        let mut n = 0;
        let mut off = done;
        for p in parts {
            if off >= p.len() {
                off -= p.len();
                continue;
            }
            iov[n] = IoSlice::new(&p[off..]);
            off = 0;
            n += 1;
        }
        match sock.write_vectored(&iov[..n]) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "connection closed while writing")),
            Ok(w) => done += w,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(done),
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

pub(super) fn queue_rest(q: &mut Vec<u8>, prefix: &[u8; PREFIX], head: &[u8], body: &[u8], mut skip: usize) {
    for p in [&prefix[..], head, body] {
        if skip >= p.len() {
            skip -= p.len();
            continue;
        }
        q.extend_from_slice(&p[skip..]);
        skip = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::{Duration, Instant};

    /// Reads until a frame comes, for at most 10 s.
    fn read_frame(framing: &mut LengthPrefix, sock: &mut TcpStream, out: &mut Vec<u8>) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while framing.next(sock, out).unwrap().is_none() {
            assert!(Instant::now() < deadline, "no frame");
            lowlat_sys::wait_readable(&*sock, Some(Duration::from_millis(50))).unwrap();
        }
    }

    #[test]
    fn a_connection_holds_what_its_peer_sent_not_what_it_claimed() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut sock, _) = listener.accept().unwrap();
        sock.set_nonblocking(true).unwrap();
        let max = 16 << 20;
        let (mut framing, mut out) = (LengthPrefix::new(max), Vec::new());
        // A prefix claiming the largest frame, and a little of it.
        peer.write_all(&(max as u32).to_le_bytes()).unwrap();
        peer.write_all(&[7; 100]).unwrap();
        lowlat_sys::wait_readable(&sock, Some(Duration::from_secs(5))).unwrap();
        assert_eq!(framing.next(&mut sock, &mut out).unwrap(), None);
        assert!(framing.buf.capacity() <= 2 * (PREFIX + READ_AHEAD), "holds {} bytes", framing.buf.capacity());
        // The rest, sent, makes the frame whole; the buffer it took is given back after it.
        let rest: Vec<u8> = (0..max - 100).map(|i| i as u8).collect();
        std::thread::scope(|s| {
            s.spawn(|| peer.write_all(&rest).unwrap());
            read_frame(&mut framing, &mut sock, &mut out);
        });
        assert_eq!(out.len(), max);
        assert_eq!(&out[..100], &[7; 100][..]);
        assert_eq!(&out[100..], &rest[..]);
        assert!(framing.held() >= max - READ_AHEAD);
        framing.trim();
        assert_eq!(framing.held(), 0);
        // Small frames after it go as before.
        peer.write_all(&[&3u32.to_le_bytes()[..], b"one"].concat()).unwrap();
        read_frame(&mut framing, &mut sock, &mut out);
        assert_eq!(out, b"one");
    }
}
