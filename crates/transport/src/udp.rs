//! UDP: a connected socket per client channel, one unconnected socket for a server.
//!
//! Sockets stay non-blocking; waiting is the caller's business (spin on `try_recv`, then block
//! in `poll`), so RPC and raw ping-pong wait in exactly the same way. A large frame is sent
//! gathered (`sendmsg` with two iovecs: header and body), so its body is never copied to prepend
//! a header; a small one is first copied into one buffer, because the kernel's single-buffer send
//! path is measurably cheaper (~0.15 µs per datagram here) than copying a few bytes.

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// Largest UDP payload over IPv4.
pub const MAX_DATAGRAM: usize = 65_507;
/// Socket buffer size asked for: room for a window of full-size fragments.
const BUFFER_BYTES: usize = 4 << 20;
/// Frames up to this size are copied into one buffer and sent with `send`/`sendto`.
const SMALL_FRAME: usize = 512;

/// Sends `head` then `body` as one datagram through `single` when they fit in one small buffer,
/// else through `gathered`.
fn send_frame(
    head: &[u8],
    body: &[u8],
    single: impl FnOnce(&[u8]) -> io::Result<usize>,
    gathered: impl FnOnce(&[IoSlice<'_>]) -> io::Result<usize>,
) -> io::Result<usize> {
    if body.is_empty() {
        return single(head);
    }
    let len = head.len() + body.len();
    if len <= SMALL_FRAME {
        let mut frame = [0u8; SMALL_FRAME];
        frame[..head.len()].copy_from_slice(head);
        frame[head.len()..len].copy_from_slice(body);
        return single(&frame[..len]);
    }
    gathered(&[IoSlice::new(head), IoSlice::new(body)])
}

fn io_err(op: &str, addr: impl std::fmt::Display, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{op} {addr}: {e}"))
}

/// Resolves `HOST:PORT` to one address (the first IPv4 one when there are several).
pub fn resolve(hostport: &str) -> io::Result<SocketAddr> {
    let mut addrs: Vec<SocketAddr> = hostport
        .to_socket_addrs()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot resolve {hostport:?}: {e}")))?
        .collect();
    addrs.sort_by_key(|a| !a.is_ipv4());
    addrs
        .into_iter()
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{hostport:?} resolves to no address")))
}

fn new_socket(addr: &SocketAddr) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(*addr), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_nonblocking(true)?;
    // Best effort: a smaller buffer only costs throughput on large messages.
    let _ = s.set_recv_buffer_size(BUFFER_BYTES);
    let _ = s.set_send_buffer_size(BUFFER_BYTES);
    Ok(s)
}

fn recv_into(s: &Socket, buf: &mut [u8]) -> io::Result<Option<(usize, SockAddr)>> {
    // SAFETY: `MaybeUninit<u8>` has the layout of `u8`, and every `u8` is a valid
    // `MaybeUninit<u8>`; the kernel only writes initialised bytes into the slice.
    let uninit = unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) };
    match s.recv_from(uninit) {
        Ok((n, a)) => Ok(Some((n, a))),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
        Err(e) => Err(e),
    }
}

/// A client's UDP channel: a socket connected to one server address.
#[derive(Debug)]
pub struct UdpChannel {
    sock: Socket,
    peer: SocketAddr,
    max_datagram: usize,
}

impl UdpChannel {
    pub fn connect(peer: SocketAddr) -> io::Result<UdpChannel> {
        let sock = new_socket(&peer).map_err(|e| io_err("create UDP socket for", peer, e))?;
        let local: SocketAddr = if peer.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("literal");
        sock.bind(&local.into()).map_err(|e| io_err("bind UDP socket for", peer, e))?;
        sock.connect(&peer.into()).map_err(|e| io_err("connect UDP socket to", peer, e))?;
        let max_datagram = path_mtu(&sock, &peer).map_or(1472, |mtu| mtu - ip_udp_overhead(&peer)).min(MAX_DATAGRAM);
        Ok(UdpChannel { sock, peer, max_datagram })
    }

    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Largest datagram that crosses the path without IP fragmentation.
    pub fn max_datagram(&self) -> usize {
        self.max_datagram
    }

    /// Sends one datagram made of `head` then `body`.
    pub fn send(&self, head: &[u8], body: &[u8]) -> io::Result<()> {
        loop {
            match send_frame(head, body, |f| self.sock.send(f), |iov| self.sock.send_vectored(iov)) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // A full send buffer: the datagram is dropped like any lost one; the protocol
                // retransmits. Waiting here would stall a caller that also has to receive.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Receives one datagram without blocking. `ConnectionRefused` means nobody listens at the
    /// peer's port (the kernel got an ICMP port-unreachable for an earlier send).
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: as in `recv_into`: the same layout, and the kernel writes only initialised bytes.
        let uninit = unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) };
        // `recv`, not `recvfrom`: the socket is connected, so the sender is known.
        match self.sock.recv(uninit) {
            Ok(n) => Ok(Some(n)),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl AsRawFd for UdpChannel {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

fn ip_udp_overhead(peer: &SocketAddr) -> usize {
    if peer.is_ipv4() {
        28
    } else {
        48
    }
}

/// The path MTU the kernel knows for a connected socket (IP_MTU / IPV6_MTU).
fn path_mtu(sock: &Socket, peer: &SocketAddr) -> Option<usize> {
    let (level, name) =
        if peer.is_ipv4() { (libc::IPPROTO_IP, libc::IP_MTU) } else { (libc::IPPROTO_IPV6, libc::IPV6_MTU) };
    let mut mtu: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `mtu` and `len` are live and sized as the option requires; the fd is open.
    let r = unsafe {
        libc::getsockopt(sock.as_raw_fd(), level, name, &mut mtu as *mut libc::c_int as *mut libc::c_void, &mut len)
    };
    (r == 0 && mtu > 100).then_some(mtu as usize)
}

/// A server's UDP socket: one socket, many peers.
#[derive(Debug)]
pub struct UdpEndpoint {
    sock: Socket,
    local: SocketAddr,
}

impl UdpEndpoint {
    pub fn bind(addr: SocketAddr) -> io::Result<UdpEndpoint> {
        let sock = new_socket(&addr).map_err(|e| io_err("create UDP socket on", addr, e))?;
        sock.bind(&addr.into()).map_err(|e| io_err("bind UDP", addr, e))?;
        let local = sock.local_addr()?.as_socket().ok_or_else(|| io::Error::other("UDP socket has no IP address"))?;
        Ok(UdpEndpoint { sock, local })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub fn send_to(&self, to: &SocketAddr, head: &[u8], body: &[u8]) -> io::Result<()> {
        let to = SockAddr::from(*to);
        loop {
            match send_frame(head, body, |f| self.sock.send_to(f, &to), |iov| self.sock.send_to_vectored(iov, &to)) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // A peer gone away (ICMP unreachable on an earlier datagram) must not stop the
                // server: to the protocol it is a lost datagram.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Receives one datagram without blocking.
    pub fn try_recv_from(&self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        loop {
            match recv_into(&self.sock, buf) {
                Ok(Some((n, a))) => match a.as_socket() {
                    Some(a) => return Ok(Some((n, a))),
                    None => continue,
                },
                Ok(None) => return Ok(None),
                // Errors queued by ICMP for earlier sends concern a peer, not this socket.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl AsRawFd for UdpEndpoint {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn gathered_send_arrives_as_one_datagram() {
        let server = UdpEndpoint::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let client = UdpChannel::connect(server.local_addr()).unwrap();
        assert!(client.max_datagram() >= 1472);
        client.send(b"head", b"body").unwrap();
        let mut buf = [0u8; 64];
        crate::sys::wait_readable(&server, Some(Duration::from_secs(5))).unwrap();
        let (n, from) = server.try_recv_from(&mut buf).unwrap().unwrap();
        assert_eq!(&buf[..n], b"headbody");
        server.send_to(&from, b"re", b"ply").unwrap();
        crate::sys::wait_readable(&client, Some(Duration::from_secs(5))).unwrap();
        assert_eq!(client.try_recv(&mut buf).unwrap(), Some(5));
        assert_eq!(&buf[..5], b"reply");
        assert_eq!(client.try_recv(&mut buf).unwrap(), None);
        // Past the small-frame copy: the gathered path, byte for byte.
        let body: Vec<u8> = (0..SMALL_FRAME * 2).map(|i| i as u8).collect();
        client.send(b"head", &body).unwrap();
        let mut big = [0u8; SMALL_FRAME * 3];
        crate::sys::wait_readable(&server, Some(Duration::from_secs(5))).unwrap();
        let (n, _) = server.try_recv_from(&mut big).unwrap().unwrap();
        assert_eq!(n, 4 + body.len());
        assert_eq!(&big[..4], b"head");
        assert_eq!(&big[4..n], &body[..]);
    }

    #[test]
    fn nobody_listening_is_reported_as_refused() {
        let port = {
            let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            s.local_addr().unwrap()
        };
        let client = UdpChannel::connect(port).unwrap();
        client.send(b"x", b"").unwrap();
        crate::sys::wait_readable(&client, Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 8];
        let e = client.try_recv(&mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
    }

    #[test]
    fn resolve_names_and_reports_bad_ones() {
        assert_eq!(resolve("127.0.0.1:9").unwrap().port(), 9);
        assert!(resolve("localhost:9").is_ok());
        let e = resolve("no port").unwrap_err().to_string();
        assert!(e.contains("no port"), "{e}");
    }
}
