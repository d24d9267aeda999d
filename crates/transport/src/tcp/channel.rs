//! The client's side: one connection, written in whole frames and read through its framing.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use super::framing::{write_frame, Framing, LengthPrefix, PREFIX};

/// A client's TCP channel: one connection.
#[derive(Debug)]
pub struct TcpChannel<F: Framing = LengthPrefix> {
    sock: TcpStream,
    framing: F,
}

impl TcpChannel<LengthPrefix> {
    /// A connection carrying lowlat's frames of at most `max_frame` bytes.
    pub fn connect(peer: SocketAddr, max_frame: usize, timeout: Duration) -> io::Result<TcpChannel> {
        TcpChannel::connect_framed(peer, LengthPrefix::new(max_frame), timeout)
    }
}

impl<F: Framing> TcpChannel<F> {
    /// A connection cut into frames by `framing`.
    pub fn connect_framed(peer: SocketAddr, framing: F, timeout: Duration) -> io::Result<TcpChannel<F>> {
        let sock = TcpStream::connect_timeout(&peer, timeout)
            .map_err(|e| io::Error::new(e.kind(), format!("connect TCP {peer}: {e}")))?;
        // With nobody listening on a port of the ephemeral range, the kernel may pick that very
        // port for this socket and connect it to itself (TCP's simultaneous open): no server
        // is there, and the port would stay taken from one that comes back.
        if sock.local_addr()? == peer {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("connect TCP {peer}: nobody listens there (the socket connected to itself)"),
            ));
        }
        sock.set_nodelay(true)?;
        sock.set_nonblocking(true)?;
        Ok(TcpChannel { sock, framing })
    }

    /// Sends one frame, `head` then `body`, blocking (in poll) while the socket is full; fails if
    /// the peer is gone. A frame larger than the framing's fragments goes in several.
    pub fn send(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        let total = head.len() + body.len();
        let max = self.framing.max_fragment().max(1);
        if total <= max {
            return self.send_fragment(&self.framing.header(total, true), head, body);
        }
        let mut at = 0;
        while at < total {
            let end = (at + max).min(total);
            // The fragment's bytes of `head` and of `body`.
            let h = &head[at.min(head.len())..end.min(head.len())];
            let b = &body[at.saturating_sub(head.len())..end.saturating_sub(head.len())];
            self.send_fragment(&self.framing.header(end - at, end == total), h, b)?;
            at = end;
        }
        Ok(())
    }

    fn send_fragment(&mut self, prefix: &[u8; PREFIX], head: &[u8], body: &[u8]) -> io::Result<()> {
        let total = PREFIX + head.len() + body.len();
        let mut done = 0;
        loop {
            done = write_frame(&mut self.sock, prefix, head, body, done)?;
            if done == total {
                return Ok(());
            }
            poll_writable(self.sock.as_raw_fd(), Some(Duration::from_millis(100)))?;
        }
    }

    /// Receives one frame into `out` without blocking. `UnexpectedEof` when the server closed.
    pub fn try_recv(&mut self, out: &mut Vec<u8>) -> io::Result<Option<()>> {
        self.framing.next(&mut self.sock, out)
    }
}

impl<F: Framing> AsRawFd for TcpChannel<F> {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

fn poll_writable(fd: RawFd, timeout: Option<Duration>) -> io::Result<()> {
    let mut p = [libc::pollfd { fd, events: libc::POLLOUT, revents: 0 }];
    lowlat_sys::poll_set(&mut p, timeout).map(|_| ())
}
