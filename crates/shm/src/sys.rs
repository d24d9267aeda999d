//! The system calls this transport needs, wrapped so the rest of the crate stays safe: futex
//! wait/wake on shared words, sealed memfds, double mappings, eventfds, epoll, `SCM_RIGHTS`
//! and `SO_PEERCRED`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

/// Sleeps while `*word == expected`, for at most `timeout`. Returns on wake-up, timeout, signal
/// or when the word already differs; the caller re-reads the word in every case.
///
/// The word lives in a `MAP_SHARED` mapping used by two processes, so the futex is a shared
/// (non-private) one.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = timespec(timeout);
    // SAFETY: `word` is a live, aligned u32 for the duration of the call; the kernel only reads
    // it. `ts` outlives the call. The remaining arguments are unused by FUTEX_WAIT.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wakes every waiter sleeping on `word`.
pub fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned u32; FUTEX_WAKE does not access memory beyond it.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX, 0usize, 0usize, 0u32);
    }
}

/// Creates a memfd of `len` bytes sealed against shrinking, growing and further sealing, so a
/// peer holding the descriptor can never truncate the pages from under our mappings (SIGBUS).
pub fn sealed_memfd(name: &str, len: usize) -> io::Result<OwnedFd> {
    let cname = std::ffi::CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: `cname` is a valid NUL-terminated string.
    let fd = cvt(unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) })?;
    // SAFETY: memfd_create just returned this descriptor and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: plain syscalls on a descriptor we own.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) })?;
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) })?;
    Ok(fd)
}

/// Checks that `fd` is sealed against resizing and has exactly `len` bytes.
pub fn check_sealed(fd: &OwnedFd, len: usize) -> io::Result<bool> {
    // SAFETY: F_GET_SEALS only reads the descriptor's seal set.
    let seals = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) })?;
    let need = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
    // SAFETY: `st` is plain data written by fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid stat buffer for the duration of the call.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(seals & need == need && st.st_size as u64 == len as u64)
}

/// A shared mapping of part of a file, optionally mapped twice back to back so that a ring's
/// data area reads as one contiguous slice across the wrap point.
#[derive(Debug)]
pub struct Mapping {
    base: NonNull<u8>,
    /// Bytes reserved (and unmapped on drop): `len` or `2 * len`.
    reserved: usize,
}

impl Mapping {
    /// Maps `len` bytes of `fd` at `offset` (both page multiples), `twice` back to back if asked.
    pub fn new(fd: &OwnedFd, offset: usize, len: usize, twice: bool) -> io::Result<Mapping> {
        let reserved = if twice { 2 * len } else { len };
        // SAFETY: an anonymous PROT_NONE reservation touches no existing memory.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserved,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = Mapping { base: NonNull::new(base.cast()).ok_or(io::ErrorKind::Other)?, reserved };
        let views = if twice { 2 } else { 1 };
        for i in 0..views {
            // SAFETY: the target range lies inside the reservation we own (MAP_FIXED replaces
            // only our own PROT_NONE pages); `fd` is a valid descriptor.
            let p = unsafe {
                libc::mmap(
                    base.cast::<u8>().add(i * len).cast(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_FIXED,
                    fd.as_raw_fd(),
                    offset as libc::off_t,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(map)
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: we own exactly this range since `new`; nothing borrows it past our lifetime
        // (the rings holding pointers into it are dropped with their owner first).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.reserved) };
    }
}

/// A non-blocking eventfd: the doorbell a client rings when the server sleeps.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the descriptor is wrapped at once.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
    // SAFETY: eventfd just returned this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds one to an eventfd. A full counter (a peer ringing without end) is not an error: the
/// reader is awake anyway.
pub fn eventfd_ring(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// Empties an eventfd's counter.
pub fn eventfd_drain(fd: RawFd) {
    let mut v: u64 = 0;
    // SAFETY: reads at most 8 bytes into a live u64.
    unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
}

/// An epoll instance.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall; wrapped at once.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: epoll_create1 just returned this descriptor.
        Ok(Epoll { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    pub fn add(&self, fd: RawFd, events: u32, data: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: data };
        // SAFETY: `ev` is a valid epoll_event for the call.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
        Ok(())
    }

    /// Removes `fd`. Needed before closing a descriptor whose file the peer still holds (an
    /// eventfd passed to the client): epoll tracks files, not descriptors.
    pub fn delete(&self, fd: RawFd) {
        // SAFETY: a null event is allowed for EPOLL_CTL_DEL.
        unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
    }

    /// Waits for events; `None` blocks without limit. Returns the filled prefix of `out`.
    ///
    /// Uses `epoll_pwait2` for its nanosecond timeout; on kernels without it (before 5.11, or
    /// under valgrind) falls back to `epoll_wait` with the timeout rounded up to a millisecond,
    /// so a wait never ends before its timeout.
    pub fn wait<'a>(
        &self,
        out: &'a mut [libc::epoll_event],
        timeout: Option<Duration>,
    ) -> io::Result<&'a [libc::epoll_event]> {
        static NO_PWAIT2: AtomicBool = AtomicBool::new(false);
        let use_pwait2 = !NO_PWAIT2.load(Ordering::Relaxed);
        match self.wait_with(out, timeout, use_pwait2) {
            Err(e) if use_pwait2 && e.raw_os_error() == Some(libc::ENOSYS) => {
                NO_PWAIT2.store(true, Ordering::Relaxed);
                self.wait(out, timeout)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(&out[..0]),
            Err(e) => Err(e),
            Ok(n) => Ok(&out[..n]),
        }
    }

    /// One `epoll_pwait2` (or `epoll_wait`) into `out`; the count of events filled in.
    fn wait_with(&self, out: &mut [libc::epoll_event], timeout: Option<Duration>, pwait2: bool) -> io::Result<usize> {
        let max = out.len().min(i32::MAX as usize) as libc::c_int;
        let n = if pwait2 {
            let ts = timeout.map(timespec);
            let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: `out` has room for `max` events; `tsp` is null or a live timespec; a null
            // sigmask keeps the current mask.
            unsafe { libc::epoll_pwait2(self.fd.as_raw_fd(), out.as_mut_ptr(), max, tsp, std::ptr::null()) }
        } else {
            // SAFETY: `out` has room for `max` events.
            unsafe { libc::epoll_wait(self.fd.as_raw_fd(), out.as_mut_ptr(), max, timeout_ms(timeout)) }
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

/// `epoll_wait`'s timeout: milliseconds rounded up (-1 for none).
fn timeout_ms(timeout: Option<Duration>) -> libc::c_int {
    match timeout {
        None => -1,
        Some(d) => d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int,
    }
}

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

const MAX_FDS: usize = 2;

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn double_mapping_aliases_the_same_pages() {
        let fd = sealed_memfd("t", 8192).unwrap();
        assert!(check_sealed(&fd, 8192).unwrap());
        assert!(!check_sealed(&fd, 4096).unwrap());
        let m = Mapping::new(&fd, 4096, 4096, true).unwrap();
        // SAFETY: both views cover 4096 bytes of the same page.
        unsafe {
            *m.as_ptr().add(5) = 42;
            assert_eq!(*m.as_ptr().add(4096 + 5), 42);
        }
        // Sealed: cannot shrink.
        // SAFETY: plain syscall on our descriptor.
        assert!(unsafe { libc::ftruncate(fd.as_raw_fd(), 0) } < 0);
    }

    #[test]
    fn epoll_wait_fallback_waits_out_its_timeout_and_reports_events() {
        assert_eq!(timeout_ms(None), -1);
        assert_eq!(timeout_ms(Some(Duration::from_nanos(1))), 1);
        assert_eq!(timeout_ms(Some(Duration::from_millis(3))), 3);
        assert_eq!(timeout_ms(Some(Duration::from_micros(3001))), 4);
        let ep = Epoll::new().unwrap();
        let bell = eventfd().unwrap();
        ep.add(bell.as_raw_fd(), libc::EPOLLIN as u32, 7).unwrap();
        let mut out = [libc::epoll_event { events: 0, u64: 0 }; 4];
        for pwait2 in [false, true] {
            let t = std::time::Instant::now();
            let n = ep.wait_with(&mut out, Some(Duration::from_micros(1500)), pwait2).unwrap();
            assert_eq!(n, 0);
            assert!(t.elapsed() >= Duration::from_micros(1500), "woke early: {:?}", t.elapsed());
            eventfd_ring(bell.as_raw_fd());
            let n = ep.wait_with(&mut out, Some(Duration::from_secs(5)), pwait2).unwrap();
            assert_eq!(n, 1);
            assert_eq!({ out[0].u64 }, 7);
            eventfd_drain(bell.as_raw_fd());
        }
    }

    #[test]
    fn futex_wait_times_out_and_wakes() {
        let w = std::sync::Arc::new(AtomicU32::new(0));
        let t = std::time::Instant::now();
        futex_wait(&w, 0, Duration::from_millis(2));
        assert!(t.elapsed() >= Duration::from_millis(2));
        let w2 = w.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            w2.store(1, Ordering::SeqCst);
            futex_wake(&w2);
        });
        let t = std::time::Instant::now();
        while w.load(Ordering::SeqCst) == 0 {
            futex_wait(&w, 0, Duration::from_secs(5));
        }
        assert!(t.elapsed() < Duration::from_secs(4));
        h.join().unwrap();
    }

    #[test]
    fn passes_descriptors() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let e = eventfd().unwrap();
        send_with_fds(a.as_raw_fd(), b"hi", &[e.as_raw_fd()]).unwrap();
        let mut buf = [0u8; 8];
        let (n, fds) = recv_with_fds(b.as_raw_fd(), &mut buf).unwrap();
        assert_eq!((&buf[..n], fds.len()), (&b"hi"[..], 1));
        eventfd_ring(fds[0].as_raw_fd());
        let ep = Epoll::new().unwrap();
        ep.add(e.as_raw_fd(), libc::EPOLLIN as u32, 7).unwrap();
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 4];
        let got = ep.wait(&mut evs, Some(Duration::from_secs(1))).unwrap();
        assert_eq!(got.len(), 1);
        let data = got[0].u64;
        assert_eq!(data, 7);
        let (uid, _, pid) = peer_cred(a.as_raw_fd()).unwrap();
        // SAFETY: plain getters.
        assert_eq!((uid, pid), (unsafe { libc::geteuid() }, std::process::id() as i32));
        assert!(!hung_up(a.as_raw_fd()));
        drop(b);
        assert!(hung_up(a.as_raw_fd()));
    }
}
