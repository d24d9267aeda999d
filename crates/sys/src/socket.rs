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
