//! Sockets of the raw Ethernet transports (AF_PACKET bound to one EtherType, AF_XDP bound to
//! one queue): opening and binding them, gathered sends and truncation-aware receives, and the
//! empty sends and receives that only prompt the kernel to work on an AF_XDP socket's rings.

use std::io::{self, IoSlice};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use crate::cvt;

/// socket(2): a new descriptor of `domain`, `ty` (close-on-exec added) and `protocol`.
pub fn socket(domain: libc::c_int, ty: libc::c_int, protocol: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers.
    let fd = cvt(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, protocol) })?;
    // SAFETY: `fd` was just returned by socket(2) and has no other owner.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn bind<T>(fd: RawFd, addr: &T) -> io::Result<()> {
    // SAFETY: `addr` is a live socket address of the length passed; the kernel only reads it.
    cvt(unsafe { libc::bind(fd, (addr as *const T).cast(), std::mem::size_of::<T>() as libc::socklen_t) }).map(|_| ())
}

/// Binds an AF_PACKET socket to interface `ifindex` for frames of `ethertype` (host order).
pub fn bind_packet(fd: RawFd, ifindex: u32, ethertype: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; all-zero is valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ethertype.to_be();
    sll.sll_ifindex = ifindex as i32;
    bind(fd, &sll)
}

/// Binds an AF_XDP socket to queue `queue` of interface `ifindex`, with `flags`
/// (XDP_ZEROCOPY, XDP_COPY, XDP_USE_NEED_WAKEUP...).
pub fn bind_xdp(fd: RawFd, ifindex: u32, queue: u32, flags: u16) -> io::Result<()> {
    let sxdp = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    bind(fd, &sxdp)
}

/// Dissolves a datagram socket's connection (connect(2) to AF_UNSPEC), so that it receives
/// from any address again, at the address it had: Linux also lets go of a port the kernel chose
/// (bound as port 0), which is taken back at once.
pub fn disconnect(fd: RawFd) -> io::Result<()> {
    // SAFETY: sockaddr_storage is plain data; all-zero is valid.
    let mut home: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `home` and `len` are valid for writes of the size given.
    cvt(unsafe { libc::getsockname(fd, (&mut home as *mut libc::sockaddr_storage).cast(), &mut len) })?;
    // SAFETY: sockaddr is plain data; all-zero with AF_UNSPEC is the documented "no peer".
    let mut none: libc::sockaddr = unsafe { std::mem::zeroed() };
    none.sa_family = libc::AF_UNSPEC as libc::sa_family_t;
    // SAFETY: `none` is a live socket address of the length passed; the kernel only reads it.
    cvt(unsafe { libc::connect(fd, &none, std::mem::size_of::<libc::sockaddr>() as libc::socklen_t) })?;
    // SAFETY: `home` holds `len` bytes of the address getsockname(2) returned; only read.
    match cvt(unsafe { libc::bind(fd, (&home as *const libc::sockaddr_storage).cast(), len) }) {
        // Still bound: the port was the caller's own choice, which the kernel keeps.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        r => r.map(|_| ()),
    }
}

/// sendmsg(2) of `parts`, gathered, on a bound socket (no address): bytes sent. Interrupted
/// sends are the caller's to retry.
#[inline]
pub fn send_gathered(fd: RawFd, parts: &[IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: msghdr is plain data; zeroed means no name and no control data.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is guaranteed ABI-compatible with iovec on Unix.
    msg.msg_iov = parts.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = parts.len() as _;
    // SAFETY: `msg` points at `parts`, whose buffers are live borrowed slices; the kernel only
    // reads them.
    let r = unsafe { libc::sendmsg(fd, &msg, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as usize)
}

/// recv(2) without blocking into `buf`: the datagram's real length, which is larger than
/// `buf` when it was truncated (MSG_TRUNC). `WouldBlock` when nothing is queued.
#[inline]
pub fn recv_truncating(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live, writable buffer of the length passed; MSG_TRUNC only changes the
    // return value to the frame's real length.
    let r = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT | libc::MSG_TRUNC) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as usize)
}

/// An empty, non-blocking sendto(2): on an AF_XDP socket, tells the kernel to process the TX
/// ring.
#[inline]
pub fn kick_send(fd: RawFd) -> io::Result<()> {
    // SAFETY: no buffer and no address: the kernel reads nothing of ours.
    let r = unsafe { libc::sendto(fd, std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// An empty, non-blocking recvfrom(2): on an AF_XDP socket, prompts the kernel to process the
/// fill ring. Its result says nothing useful and is not returned.
#[inline]
pub fn kick_recv(fd: RawFd) {
    // SAFETY: no buffer and no address: the kernel writes nothing of ours.
    unsafe {
        libc::recvfrom(fd, std::ptr::null_mut(), 0, libc::MSG_DONTWAIT, std::ptr::null_mut(), std::ptr::null_mut())
    };
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    #[test]
    fn a_disconnected_socket_hears_everyone_again() {
        let server = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let (a, b) =
            (std::net::UdpSocket::bind("127.0.0.1:0").unwrap(), std::net::UdpSocket::bind("127.0.0.1:0").unwrap());
        let at = server.local_addr().unwrap();
        server.connect(a.local_addr().unwrap()).unwrap();
        super::disconnect(server.as_raw_fd()).unwrap();
        assert_eq!(server.local_addr().unwrap(), at, "the port the kernel chose is kept");
        b.send_to(b"hi", at).unwrap();
        server.set_read_timeout(Some(std::time::Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 8];
        let (n, from) = server.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], from), (&b"hi"[..], b.local_addr().unwrap()));
    }
}
