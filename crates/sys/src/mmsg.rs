//! Batches of datagrams moved by one system call each way: recvmmsg(2) and sendmmsg(2), never
//! blocking, on a connected socket (no addresses) or, [`Batch::addressed`], an unconnected one
//! (each datagram with its peer's address). A [`Batch`] owns its buffers and the kernel's
//! headers for them, built once, so a batch received or sent allocates nothing.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::ops::Range;
use std::os::fd::RawFd;

/// Up to `capacity` datagrams of at most `slot` bytes each, with the headers recvmmsg(2) and
/// sendmmsg(2) read: each header points at its own iovec, each iovec at its own slot.
pub struct Batch {
    data: Vec<u8>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    lens: Vec<usize>,
    slot: usize,
    /// Each datagram's peer address (an addressed batch's; empty otherwise).
    names: Vec<libc::sockaddr_storage>,
}

// SAFETY: the raw pointers in `iovs` and `hdrs` lead only into `data` and `iovs`, heap buffers
// the batch owns and never reallocates; nothing in them is tied to a thread.
unsafe impl Send for Batch {}

impl Batch {
    /// A batch of `capacity` slots (at least one) of `slot` bytes (at least one).
    pub fn new(capacity: usize, slot: usize) -> Batch {
        let (capacity, slot) = (capacity.max(1), slot.max(1));
        let mut data = vec![0u8; capacity * slot];
        let mut iovs: Vec<libc::iovec> = (0..capacity)
            .map(|i| libc::iovec {
                // In bounds: slot `i` starts at `i * slot < capacity * slot`.
                iov_base: data[i * slot..].as_mut_ptr().cast(),
                iov_len: slot,
            })
            .collect();
        let hdrs = (0..capacity)
            .map(|i| {
                // SAFETY: mmsghdr is plain data; all-zero means no name, no control data.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = &mut iovs[i];
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        Batch { data, iovs, hdrs, lens: vec![0; capacity], slot, names: Vec::new() }
    }

    /// A batch for an unconnected socket: each datagram received with its source's address
    /// ([`addr`](Self::addr)), each sent to the address set for it ([`set_addr`](Self::set_addr)).
    pub fn addressed(capacity: usize, slot: usize) -> Batch {
        let mut b = Batch::new(capacity, slot);
        // SAFETY: sockaddr_storage is plain data; all-zero is the unspecified family.
        b.names = (0..b.capacity()).map(|_| unsafe { std::mem::zeroed::<libc::sockaddr_storage>() }).collect();
        for (h, name) in b.hdrs.iter_mut().zip(b.names.iter_mut()) {
            h.msg_hdr.msg_name = (name as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_namelen = STORAGE_LEN;
        }
        b
    }

    /// The address datagram `i` came from (an addressed batch's, after [`recv`](Self::recv)).
    pub fn addr(&self, i: usize) -> Option<SocketAddr> {
        let name = self.names.get(i)?;
        let len = self.hdrs[i].msg_hdr.msg_namelen as usize;
        match name.ss_family as libc::c_int {
            libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
                // SAFETY: the kernel wrote a sockaddr_in here (its family and length say so);
                // sockaddr_storage is large and aligned enough for any socket address.
                let sin = unsafe { &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
            }
            libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as above, for a sockaddr_in6.
                let sin6 = unsafe { &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
                let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                Some(SocketAddr::V6(SocketAddrV6::new(
                    ip,
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }

    /// Sends datagram `i` to `to` (an addressed batch's; ignored by a connected one's).
    pub fn set_addr(&mut self, i: usize, to: &SocketAddr) {
        let Some(name) = self.names.get_mut(i) else { return };
        let len = match to {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than, and aligned for, a sockaddr_in.
                unsafe { std::ptr::write((name as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>(), sin) };
                std::mem::size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: sockaddr_storage is larger than, and aligned for, a sockaddr_in6.
                unsafe { std::ptr::write((name as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>(), sin6) };
                std::mem::size_of::<libc::sockaddr_in6>()
            }
        };
        self.hdrs[i].msg_hdr.msg_namelen = len as libc::socklen_t;
    }

    /// How many datagrams the batch holds at most.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// The datagram in slot `i` (as received, or as set by [`Self::set_len`]).
    pub fn get(&self, i: usize) -> &[u8] {
        &self.data[i * self.slot..][..self.lens[i]]
    }

    /// The whole of slot `i`, to write a datagram into; say its length with [`Self::set_len`].
    pub fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.data[i * self.slot..][..self.slot]
    }

    /// Sets the length of the datagram in slot `i` (at most the slot's size).
    pub fn set_len(&mut self, i: usize, len: usize) {
        self.lens[i] = len.min(self.slot);
    }

    /// Receives, without blocking, as many datagrams as are queued (up to the capacity) into
    /// slots `0..n`; returns `n`, 0 when none is queued or a signal interrupted the call. A
    /// datagram longer than a slot is cut to the slot.
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        for iov in &mut self.iovs {
            iov.iov_len = self.slot;
        }
        if !self.names.is_empty() {
            for h in &mut self.hdrs {
                h.msg_hdr.msg_namelen = STORAGE_LEN;
            }
        }
        // SAFETY: every header points at its own iovec, and each iovec at its own `slot` bytes
        // of `data`, and (addressed) at its own sockaddr_storage of `names`, all live and owned
        // by `self` for the call; the kernel writes at most `iov_len` bytes per datagram, at
        // most `msg_namelen` bytes of address, and the lengths into the headers.
        let n = unsafe {
            libc::recvmmsg(fd, self.hdrs.as_mut_ptr(), self.hdrs.len() as _, libc::MSG_DONTWAIT, std::ptr::null_mut())
        };
        let n = nonblocking(n)?;
        for i in 0..n {
            self.lens[i] = (self.hdrs[i].msg_len as usize).min(self.slot);
        }
        Ok(n)
    }

    /// Sends, without blocking, the datagrams of slots `range` in order; returns how many went
    /// (the first ones of the range; fewer when the socket's buffer filled, 0 when it was full
    /// or a signal interrupted the call).
    pub fn send(&mut self, fd: RawFd, range: Range<usize>) -> io::Result<usize> {
        let range = range.start.min(self.capacity())..range.end.min(self.capacity());
        if range.is_empty() {
            return Ok(0);
        }
        for i in range.clone() {
            self.iovs[i].iov_len = self.lens[i];
        }
        // SAFETY: `range` lies within `hdrs`; each of its headers points at its own iovec and
        // each iovec at `lens[i] <= slot` bytes of `data`, live for the call; the kernel only
        // reads them (and writes `msg_len`).
        let n =
            unsafe { libc::sendmmsg(fd, self.hdrs[range.start..].as_mut_ptr(), range.len() as _, libc::MSG_DONTWAIT) };
        nonblocking(n)
    }
}

/// The room for an address each header of an addressed batch offers the kernel.
const STORAGE_LEN: libc::socklen_t = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;

/// The count a non-blocking batch call returned, 0 for "would block" and "interrupted".
fn nonblocking(n: libc::c_int) -> io::Result<usize> {
    if n >= 0 {
        return Ok(n as usize);
    }
    let e = io::Error::last_os_error();
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
        _ => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    fn pair() -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.connect(a.local_addr().unwrap()).unwrap();
        (a, b)
    }

    #[test]
    fn a_batch_goes_out_in_one_call_and_comes_back_in_order() {
        let (a, b) = pair();
        let mut out = Batch::new(8, 64);
        for i in 0..5 {
            out.slot_mut(i)[..3].copy_from_slice(&[i as u8, 1, 2]);
            out.set_len(i, 3 + i);
        }
        assert_eq!(out.send(a.as_raw_fd(), 0..5).unwrap(), 5);
        let mut got = Batch::new(4, 64);
        // Loopback delivers at once, but give the kernel a moment rather than trust it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut seen = Vec::new();
        while seen.len() < 5 && std::time::Instant::now() < deadline {
            let n = got.recv(b.as_raw_fd()).unwrap();
            assert!(n <= 4, "never more than the capacity");
            seen.extend((0..n).map(|i| got.get(i).to_vec()));
        }
        assert_eq!(seen.len(), 5);
        for (i, d) in seen.iter().enumerate() {
            assert_eq!(d.len(), 3 + i);
            assert_eq!(d[0], i as u8);
        }
        assert_eq!(got.recv(b.as_raw_fd()).unwrap(), 0, "nothing queued: no wait, no error");
    }

    #[test]
    fn long_datagrams_are_cut_to_the_slot_and_empty_ranges_send_nothing() {
        let (a, b) = pair();
        a.send(&[7u8; 100]).unwrap();
        let mut got = Batch::new(2, 16);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut n = 0;
        while n == 0 && std::time::Instant::now() < deadline {
            n = got.recv(b.as_raw_fd()).unwrap();
        }
        assert_eq!(n, 1);
        assert_eq!(got.get(0), &[7u8; 16][..]);
        assert_eq!(got.send(b.as_raw_fd(), 1..1).unwrap(), 0);
        assert_eq!(got.send(b.as_raw_fd(), 5..9).unwrap(), 0, "a range past the capacity sends nothing");
    }

    /// An unconnected socket's batch: each datagram comes with its source, and goes back to
    /// the address set for it, IPv4 and IPv6 alike.
    #[test]
    fn an_addressed_batch_knows_each_datagrams_peer() {
        for local in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(server) = UdpSocket::bind(local) else { continue };
            let clients: Vec<UdpSocket> = (0..3).map(|_| UdpSocket::bind(local).unwrap()).collect();
            for (i, c) in clients.iter().enumerate() {
                c.send_to(&[i as u8; 5], server.local_addr().unwrap()).unwrap();
            }
            let mut rx = Batch::addressed(8, 64);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
            let mut got = Vec::new();
            while got.len() < 3 && std::time::Instant::now() < deadline {
                let n = rx.recv(server.as_raw_fd()).unwrap();
                got.extend((0..n).map(|i| (rx.get(i).to_vec(), rx.addr(i).expect("a source"))));
            }
            assert_eq!(got.len(), 3, "{local}");
            let mut tx = Batch::addressed(8, 64);
            for (i, (d, from)) in got.iter().enumerate() {
                assert_eq!(*from, clients[d[0] as usize].local_addr().unwrap(), "{local}: the source");
                tx.slot_mut(i)[..d.len()].copy_from_slice(d);
                tx.set_len(i, d.len());
                tx.set_addr(i, from);
            }
            assert_eq!(tx.send(server.as_raw_fd(), 0..3).unwrap(), 3);
            for (i, c) in clients.iter().enumerate() {
                c.set_read_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
                let mut buf = [0u8; 16];
                let (n, from) = c.recv_from(&mut buf).unwrap();
                assert_eq!((&buf[..n], from), (&[i as u8; 5][..], server.local_addr().unwrap()), "{local}");
            }
            // One datagram of the batch alone goes to its own address too.
            let i = got.iter().position(|(d, _)| d[0] == 2).expect("client 2's datagram");
            assert_eq!(tx.send(server.as_raw_fd(), i..i + 1).unwrap(), 1);
            let mut buf = [0u8; 16];
            let (n, from) = clients[2].recv_from(&mut buf).unwrap();
            assert_eq!((&buf[..n], from), (&[2u8; 5][..], server.local_addr().unwrap()), "{local}: alone");
        }
    }

    /// A single datagram of a batch on a connected socket goes alone, its length as set.
    #[test]
    fn a_single_datagram_goes_alone() {
        let (a, b) = pair();
        let mut out = Batch::new(4, 2048);
        out.slot_mut(1)[..4].copy_from_slice(b"only");
        out.set_len(1, 4);
        assert_eq!(out.send(a.as_raw_fd(), 1..2).unwrap(), 1);
        b.set_read_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 16];
        let n = b.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"only");
    }
}
