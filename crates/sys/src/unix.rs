//! Unix sockets: the peer's credentials, descriptors passed with `SCM_RIGHTS`, hang-up checks.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use crate::cvt;

/// The peer's credentials on a connected Unix socket.
pub fn peer_cred(fd: RawFd) -> io::Result<(u32, u32, i32)> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given.
    cvt(unsafe {
        libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut cred as *mut libc::ucred).cast(), &mut len)
    })?;
    Ok((cred.uid, cred.gid, cred.pid))
}

const MAX_FDS: usize = 3;

/// Sends `data` with `fds` attached (`SCM_RIGHTS`).
pub fn send_with_fds(sock: RawFd, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    assert!(fds.len() <= MAX_FDS);
    let mut cbuf = [0u64; 8]; // 64 bytes: room for a cmsg with two ints, u64-aligned.
    let mut iov = libc::iovec { iov_base: data.as_ptr() as *mut _, iov_len: data.len() };
    // SAFETY: msghdr is plain data; zeroed is a valid empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        let fd_bytes = std::mem::size_of_val(fds) as u32;
        // SAFETY: CMSG_SPACE is a pure size computation.
        let space = unsafe { libc::CMSG_SPACE(fd_bytes) } as usize;
        debug_assert!(space <= std::mem::size_of_val(&cbuf));
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: msg_control points at `space` zeroed bytes, enough for one header plus the
        // descriptors; CMSG_FIRSTHDR therefore returns a valid, aligned header inside `cbuf`.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(fd_bytes) as _;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast::<RawFd>(), fds.len());
        }
    }
    // SAFETY: `msg` points at live iovec and control buffers for the duration of the call.
    let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != data.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short handshake write"));
    }
    Ok(())
}

/// Receives up to `buf.len()` bytes and any descriptors attached. Every descriptor received is
/// owned at once, so unexpected ones are closed rather than leaked.
pub fn recv_with_fds(sock: RawFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut cbuf = [0u64; 16];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: msghdr is plain data; zeroed is a valid empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    // SAFETY: `msg` points at live buffers of the sizes given.
    let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `msg_controllen` bytes of `cbuf` with well-formed cmsg headers;
    // CMSG_FIRSTHDR/NXTHDR stay within that length, and each SCM_RIGHTS payload holds
    // (cmsg_len - CMSG_LEN(0)) / 4 descriptors now owned by this process.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let payload = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let count = payload / std::mem::size_of::<RawFd>();
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "too many descriptors attached"));
    }
    Ok((n as usize, fds))
}

/// Whether a connected socket has hung up (or has unexpected bytes: the liveness channel carries
/// none after the handshake), without blocking.
pub fn hung_up(fd: RawFd) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN | libc::POLLRDHUP, revents: 0 };
    // SAFETY: one valid pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents != 0
}

/// This process's effective user id.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Epoll, EventFd};
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    #[test]
    fn passes_descriptors() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let e = EventFd::new().unwrap();
        send_with_fds(a.as_raw_fd(), b"hi", &[e.as_raw_fd()]).unwrap();
        let mut buf = [0u8; 8];
        let (n, mut fds) = recv_with_fds(b.as_raw_fd(), &mut buf).unwrap();
        assert_eq!((&buf[..n], fds.len()), (&b"hi"[..], 1));
        EventFd::from_owned(fds.remove(0)).ring();
        let ep = Epoll::new().unwrap();
        ep.add(e.as_raw_fd(), libc::EPOLLIN as u32, 7).unwrap();
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 4];
        let got = ep.wait(&mut evs, Some(Duration::from_secs(1))).unwrap();
        assert_eq!(got.len(), 1);
        let data = got[0].u64;
        assert_eq!(data, 7);
        let (uid, _, pid) = peer_cred(a.as_raw_fd()).unwrap();
        assert_eq!((uid, pid), (effective_uid(), std::process::id() as i32));
        assert!(!hung_up(a.as_raw_fd()));
        drop(b);
        assert!(hung_up(a.as_raw_fd()));
    }
}
