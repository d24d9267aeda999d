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
            // Make room: move the partial frame to the front, grow to hold a whole one.
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
                PREFIX + 64 * 1024
            };
            if self.buf.len() < want.max(PREFIX + 64 * 1024) {
                self.buf.resize(want.max(PREFIX + 64 * 1024), 0);
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
