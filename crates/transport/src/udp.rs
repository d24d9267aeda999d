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
use std::sync::atomic::{AtomicU64, Ordering};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::allow::{allowed, Cidr};

/// Largest UDP payload over IPv4.
pub const MAX_DATAGRAM: usize = 65_507;
/// Socket buffer size asked for: room for a window of full-size fragments.
const BUFFER_BYTES: usize = 4 << 20;
/// Frames up to this size are copied into one buffer and sent with `send`/`sendto`.
const SMALL_FRAME: usize = 512;

/// Bytes of the end-to-end check a datagram carries after its payload when checksums are on:
/// a CRC32C of everything before it. UDP's own 16-bit sum misses what a middlebox rewrites, a
/// NIC corrupts after checking, or a relay flips on purpose; this catches them.
pub const CRC_LEN: usize = 4;

/// The trailer of a checksummed datagram made of `head` then `body`.
fn trailer(head: &[u8], body: &[u8]) -> [u8; CRC_LEN] {
    crc32c::crc32c_append(crc32c::crc32c(head), body).to_le_bytes()
}

/// The payload of a received checksummed datagram, or `None` if its check fails.
fn checked(datagram: &[u8]) -> Option<usize> {
    let n = datagram.len().checked_sub(CRC_LEN)?;
    let want = u32::from_le_bytes(datagram[n..].try_into().ok()?);
    (crc32c::crc32c(&datagram[..n]) == want).then_some(n)
}

/// Sends `head`, `body` and (with checksums on) their CRC32C as one datagram through `single`
/// when they fit in one small buffer, else through `gathered`.
fn send_frame(
    head: &[u8],
    body: &[u8],
    checksum: bool,
    single: impl FnOnce(&[u8]) -> io::Result<usize>,
    gathered: impl FnOnce(&[IoSlice<'_>]) -> io::Result<usize>,
) -> io::Result<usize> {
    if body.is_empty() && !checksum {
        return single(head);
    }
    let len = head.len() + body.len() + if checksum { CRC_LEN } else { 0 };
    // The buffer is zeroed before use: the smallest frames (a null call's, a small call's) get
    // one of a cache line, not of SMALL_FRAME bytes.
    if len <= TINY_FRAME {
        return send_copied::<TINY_FRAME>(head, body, checksum, single);
    }
    if len <= SMALL_FRAME {
        return send_copied::<SMALL_FRAME>(head, body, checksum, single);
    }
    let crc = if checksum { trailer(head, body) } else { [0; CRC_LEN] };
    let crc = if checksum { &crc[..] } else { &[][..] };
    gathered(&[IoSlice::new(head), IoSlice::new(body), IoSlice::new(crc)])
}

/// Frames up to this size are copied into a buffer of this size (see [`send_frame`]).
const TINY_FRAME: usize = 64;

/// Copies `head`, `body` and (with checksums on) their CRC32C, computed over the copy in one
/// pass, into a buffer of `N` bytes, and sends it through `single`.
fn send_copied<const N: usize>(
    head: &[u8],
    body: &[u8],
    checksum: bool,
    single: impl FnOnce(&[u8]) -> io::Result<usize>,
) -> io::Result<usize> {
    let mut frame = [0u8; N];
    let n = write_frame(head, body, checksum, &mut frame).expect("the caller chose N for the frame");
    single(&frame[..n])
}

/// Writes `head`, `body` and (with `checksum`) their CRC32C, computed over the copy in one pass,
/// into `out` as one datagram; its length, or `None` when it does not fit.
fn write_frame(head: &[u8], body: &[u8], checksum: bool, out: &mut [u8]) -> Option<usize> {
    let n = head.len() + body.len();
    let out = out.get_mut(..n + if checksum { CRC_LEN } else { 0 })?;
    out[..head.len()].copy_from_slice(head);
    out[head.len()..n].copy_from_slice(body);
    if checksum {
        let crc = crc32c::crc32c(&out[..n]).to_le_bytes();
        out[n..].copy_from_slice(&crc);
    }
    Some(out.len())
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
    checksum: bool,
    /// Datagrams dropped for a failed checksum. Atomic because receiving takes `&self`; touched
    /// only on a failure, never on a good datagram's path.
    checksum_failures: AtomicU64,
}

impl UdpChannel {
    /// A socket bound to an ephemeral port and connected to `peer` (so it receives from `peer`
    /// only), its largest datagram taken from the path MTU (1472 bytes if the system does not say).
    pub fn connect(peer: SocketAddr) -> io::Result<UdpChannel> {
        let sock = new_socket(&peer).map_err(|e| io_err("create UDP socket for", peer, e))?;
        let local: SocketAddr = if peer.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("literal");
        sock.bind(&local.into()).map_err(|e| io_err("bind UDP socket for", peer, e))?;
        sock.connect(&peer.into()).map_err(|e| io_err("connect UDP socket to", peer, e))?;
        let max_datagram = path_mtu(&sock, &peer).map_or(1472, |mtu| mtu - ip_udp_overhead(&peer)).min(MAX_DATAGRAM);
        Ok(UdpChannel { sock, peer, max_datagram, checksum: false, checksum_failures: AtomicU64::new(0) })
    }

    /// Adds (and requires) a CRC32C after every datagram's payload ([`CRC_LEN`] bytes): both
    /// ends must agree.
    pub fn with_checksum(mut self, on: bool) -> UdpChannel {
        self.checksum = on;
        self
    }

    /// Datagrams this channel dropped for a wrong or missing checksum.
    pub fn checksum_failures(&self) -> u64 {
        self.checksum_failures.load(Ordering::Relaxed)
    }

    /// The server address the channel is connected to.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Largest payload that crosses the path without IP fragmentation (a checksum's bytes
    /// excluded).
    pub fn max_datagram(&self) -> usize {
        self.max_datagram - if self.checksum { CRC_LEN } else { 0 }
    }

    /// Sends one datagram made of `head` then `body`.
    pub fn send(&self, head: &[u8], body: &[u8]) -> io::Result<()> {
        loop {
            match send_frame(head, body, self.checksum, |f| self.sock.send(f), |iov| self.sock.send_vectored(iov)) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // A full send buffer: the datagram is dropped like any lost one; the protocol
                // retransmits. Waiting here would stall a caller that also has to receive.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Receives one datagram's payload without blocking (a datagram whose checksum fails is
    /// dropped and the next one taken). `ConnectionRefused` means nobody listens at the peer's
    /// port (the kernel got an ICMP port-unreachable for an earlier send).
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            // SAFETY: as in `recv_into`: the same layout, and the kernel writes only initialised
            // bytes.
            let uninit = unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) };
            // `recv`, not `recvfrom`: the socket is connected, so the sender is known.
            let n = match self.sock.recv(uninit) {
                Ok(n) => n,
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {
                    return Ok(None)
                }
                Err(e) => return Err(e),
            };
            if !self.checksum {
                return Ok(Some(n));
            }
            match checked(&buf[..n]) {
                Some(n) => return Ok(Some(n)),
                None => {
                    self.checksum_failures.fetch_add(1, Ordering::Relaxed);
                }
            }
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
    let mtu: libc::c_int = lowlat_sys::getsockopt(sock.as_raw_fd(), level, name).ok()?;
    (mtu > 100).then_some(mtu as usize)
}

/// A server's UDP socket: one socket, many peers.
#[derive(Debug)]
pub struct UdpEndpoint {
    sock: Socket,
    local: SocketAddr,
    checksum: bool,
    allow: Vec<Cidr>,
    not_allowed: u64,
    checksum_failures: u64,
}

impl UdpEndpoint {
    /// A non-blocking socket bound to `addr` (port 0: any free port, see
    /// [`local_addr`](Self::local_addr)), serving every source until an allowlist is given.
    pub fn bind(addr: SocketAddr) -> io::Result<UdpEndpoint> {
        let sock = new_socket(&addr).map_err(|e| io_err("create UDP socket on", addr, e))?;
        sock.bind(&addr.into()).map_err(|e| io_err("bind UDP", addr, e))?;
        let local = sock.local_addr()?.as_socket().ok_or_else(|| io::Error::other("UDP socket has no IP address"))?;
        Ok(UdpEndpoint { sock, local, checksum: false, allow: Vec::new(), not_allowed: 0, checksum_failures: 0 })
    }

    /// `n` sockets bound to `addr` in one `SO_REUSEPORT` group (port 0: one free port for all),
    /// one per serving thread: the kernel spreads datagrams over them by a hash of their
    /// addresses, or, with a `steering` program (classic BPF over the UDP payload, attached to
    /// the group: `SO_ATTACH_REUSEPORT_CBPF`), to the socket whose number, in the order bound,
    /// the program returns; a number past the last falls back to the hash. A group of one is
    /// bound as [`bind`](Self::bind) binds it, with no option set. A port something holds
    /// already fails the bind (`AddrInUse`), whatever its options; only sockets of this user
    /// may join the group once it is made.
    pub fn bind_group(
        addr: SocketAddr,
        n: usize,
        steering: Option<&[libc::sock_filter]>,
    ) -> io::Result<Vec<UdpEndpoint>> {
        // A plain bind first (not kept): a group would share its port with any socket of this
        // user that set SO_REUSEPORT there, such as another server's, where a plain bind
        // fails as any second server's does. For port 0 it also finds a port nobody holds.
        let alone = UdpEndpoint::bind(addr)?;
        if n <= 1 {
            return Ok(vec![alone]);
        }
        let at = alone.local;
        drop(alone);
        let mut group: Vec<UdpEndpoint> = Vec::with_capacity(n);
        for _ in 0..n {
            let sock = new_socket(&at).map_err(|e| io_err("create UDP socket on", at, e))?;
            sock.set_reuse_port(true).map_err(|e| io_err("set SO_REUSEPORT on", at, e))?;
            sock.bind(&at.into()).map_err(|e| io_err("bind UDP", at, e))?;
            let local =
                sock.local_addr()?.as_socket().ok_or_else(|| io::Error::other("UDP socket has no IP address"))?;
            group.push(UdpEndpoint {
                sock,
                local,
                checksum: false,
                allow: Vec::new(),
                not_allowed: 0,
                checksum_failures: 0,
            });
        }
        if let Some(program) = steering {
            let fprog = libc::sock_fprog { len: program.len() as libc::c_ushort, filter: program.as_ptr().cast_mut() };
            lowlat_sys::setsockopt(group[0].sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ATTACH_REUSEPORT_CBPF, &fprog)
                .map_err(|e| io_err("attach the steering program to UDP", at, e))?;
        }
        Ok(group)
    }

    /// Serves only datagrams from these blocks (all, when empty); the others are dropped
    /// unread and counted ([`not_allowed`](Self::not_allowed)).
    pub fn with_allowlist(mut self, allow: Vec<Cidr>) -> UdpEndpoint {
        self.allow = allow;
        self
    }

    /// Datagrams dropped for coming from outside the allowlist.
    pub fn not_allowed(&self) -> u64 {
        self.not_allowed
    }

    /// Datagrams this endpoint dropped for a wrong or missing checksum.
    pub fn checksum_failures(&self) -> u64 {
        self.checksum_failures
    }

    /// Adds (and requires) a CRC32C after every datagram's payload, as
    /// [`UdpChannel::with_checksum`].
    pub fn with_checksum(mut self, on: bool) -> UdpEndpoint {
        self.checksum = on;
        self
    }

    /// Largest payload a datagram carries (a checksum's bytes excluded).
    pub fn max_datagram(&self) -> usize {
        MAX_DATAGRAM - if self.checksum { CRC_LEN } else { 0 }
    }

    /// The address bound (with the port the system chose, if 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Sends `head` then `body` as one datagram to `to` (the checksum after them, if on). A full
    /// socket buffer or an unreachable peer drops the datagram as the network would, without error.
    pub fn send_to(&self, to: &SocketAddr, head: &[u8], body: &[u8]) -> io::Result<()> {
        let to = SockAddr::from(*to);
        loop {
            let single = |f: &[u8]| self.sock.send_to(f, &to);
            match send_frame(head, body, self.checksum, single, |iov| self.sock.send_to_vectored(iov, &to)) {
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

    /// Receives one datagram's payload without blocking (one whose checksum fails is dropped).
    pub fn try_recv_from(&mut self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        loop {
            match recv_into(&self.sock, buf) {
                Ok(Some((n, a))) => {
                    let Some(a) = a.as_socket() else { continue };
                    if let Some(n) = self.accept(a.ip(), &buf[..n]) {
                        return Ok(Some((n, a)));
                    }
                }
                Ok(None) => return Ok(None),
                // Errors queued by ICMP for earlier sends concern a peer, not this socket.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl UdpEndpoint {
    /// The payload length of `datagram`, received from `from` (by [`try_recv_from`] or by the
    /// caller, in a batch), or `None` when it is dropped: from outside the allowlist, or with a
    /// wrong checksum (each counted).
    ///
    /// [`try_recv_from`]: Self::try_recv_from
    pub fn accept(&mut self, from: std::net::IpAddr, datagram: &[u8]) -> Option<usize> {
        if !allowed(&self.allow, from) {
            self.not_allowed += 1;
            return None;
        }
        if !self.checksum {
            return Some(datagram.len());
        }
        let n = checked(datagram);
        self.checksum_failures += u64::from(n.is_none());
        n
    }

    /// Writes `head`, `body` and (with checksums on) their CRC32C into `out` as one datagram, for
    /// the caller to send in a batch; its length, or `None` when it does not fit.
    pub fn frame_into(&self, head: &[u8], body: &[u8], out: &mut [u8]) -> Option<usize> {
        write_frame(head, body, self.checksum, out)
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
        let mut server = UdpEndpoint::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let client = UdpChannel::connect(server.local_addr()).unwrap();
        assert!(client.max_datagram() >= 1472);
        client.send(b"head", b"body").unwrap();
        let mut buf = [0u8; 64];
        lowlat_sys::wait_readable(&server, Some(Duration::from_secs(5))).unwrap();
        let (n, from) = server.try_recv_from(&mut buf).unwrap().unwrap();
        assert_eq!(&buf[..n], b"headbody");
        server.send_to(&from, b"re", b"ply").unwrap();
        lowlat_sys::wait_readable(&client, Some(Duration::from_secs(5))).unwrap();
        assert_eq!(client.try_recv(&mut buf).unwrap(), Some(5));
        assert_eq!(&buf[..5], b"reply");
        assert_eq!(client.try_recv(&mut buf).unwrap(), None);
        // Past the small-frame copy: the gathered path, byte for byte.
        let body: Vec<u8> = (0..SMALL_FRAME * 2).map(|i| i as u8).collect();
        client.send(b"head", &body).unwrap();
        let mut big = [0u8; SMALL_FRAME * 3];
        lowlat_sys::wait_readable(&server, Some(Duration::from_secs(5))).unwrap();
        let (n, _) = server.try_recv_from(&mut big).unwrap().unwrap();
        assert_eq!(n, 4 + body.len());
        assert_eq!(&big[..4], b"head");
        assert_eq!(&big[4..n], &body[..]);
    }

    /// With checksums on, every payload size arrives whole (small frames copied, large ones
    /// gathered with the trailer); a datagram with one bit flipped, one too short to hold a
    /// checksum, or one sent without it is dropped and counted, and the next good one taken.
    #[test]
    fn checksummed_datagrams_arrive_whole_and_damaged_ones_are_dropped() {
        let mut server = UdpEndpoint::bind("127.0.0.1:0".parse().unwrap()).unwrap().with_checksum(true);
        let client = UdpChannel::connect(server.local_addr()).unwrap().with_checksum(true);
        assert_eq!(server.max_datagram(), MAX_DATAGRAM - CRC_LEN);
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let wait = |fd: &dyn AsRawFd| lowlat_sys::poll_readable(&[fd.as_raw_fd()], Some(Duration::from_secs(5)));
        for n in [0usize, 1, SMALL_FRAME - 8 - CRC_LEN, SMALL_FRAME - 8 - CRC_LEN + 1, 5000] {
            let body: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
            client.send(b"headhead", &body).unwrap();
            wait(&server).unwrap();
            let (got, from) = server.try_recv_from(&mut buf).unwrap().unwrap();
            assert_eq!(&buf[..got], [&b"headhead"[..], &body].concat(), "{n} bytes");
            server.send_to(&from, b"re", &body).unwrap();
            wait(&client).unwrap();
            let got = client.try_recv(&mut buf).unwrap().unwrap();
            assert_eq!(&buf[..got], [&b"re"[..], &body].concat(), "{n} bytes back");
        }
        let raw = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut good = b"payload".to_vec();
        good.extend_from_slice(&trailer(b"pay", b"load"));
        let mut flipped = good.clone();
        flipped[2] ^= 0x10;
        assert_eq!(server.checksum_failures(), 0);
        for d in [&flipped[..], &b"abc"[..], &b"no checksum at all"[..], &good[..]] {
            raw.send_to(d, server.local_addr()).unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        let (got, _) = server.try_recv_from(&mut buf).unwrap().unwrap();
        assert_eq!(&buf[..got], b"payload", "the damaged ones were skipped");
        assert_eq!(server.checksum_failures(), 3, "counted by the endpoint that dropped them");
        assert_eq!(client.checksum_failures(), 0);
        assert_eq!(server.try_recv_from(&mut buf).unwrap(), None);
    }

    /// Datagrams from outside the allowlist are dropped unread and counted; the rest arrive.
    #[test]
    fn an_allowlist_drops_strangers() {
        let mut server = UdpEndpoint::bind("127.0.0.1:0".parse().unwrap())
            .unwrap()
            .with_allowlist(vec!["127.0.0.2/32".parse().unwrap()]);
        let stranger = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let friend = std::net::UdpSocket::bind("127.0.0.2:0").unwrap();
        stranger.send_to(b"no", server.local_addr()).unwrap();
        friend.send_to(b"yes", server.local_addr()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let mut buf = [0u8; 16];
        let (n, from) = server.try_recv_from(&mut buf).unwrap().unwrap();
        assert_eq!((&buf[..n], from), (&b"yes"[..], friend.local_addr().unwrap()));
        assert_eq!(server.try_recv_from(&mut buf).unwrap(), None);
        assert_eq!(server.not_allowed(), 1);
    }

    #[test]
    fn nobody_listening_is_reported_as_refused() {
        let port = {
            let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            s.local_addr().unwrap()
        };
        let client = UdpChannel::connect(port).unwrap();
        client.send(b"x", b"").unwrap();
        lowlat_sys::wait_readable(&client, Some(Duration::from_secs(5))).unwrap();
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
