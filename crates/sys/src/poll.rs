//! Waiting on descriptors: `ppoll` for a few, epoll for many.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::{cvt, timespec};

/// Blocks until one of `fds` is readable (or hung up / in error) or `timeout` passes.
/// Returns the number of ready descriptors (0 on timeout). Microsecond precision (ppoll).
pub fn poll_readable(fds: &[RawFd], timeout: Option<Duration>) -> io::Result<usize> {
    const MAX: usize = 8;
    assert!(fds.len() <= MAX, "poll_readable: at most {MAX} descriptors");
    let mut pfds = [libc::pollfd { fd: -1, events: 0, revents: 0 }; MAX];
    for (p, &fd) in pfds.iter_mut().zip(fds) {
        p.fd = fd;
        p.events = libc::POLLIN;
    }
    poll_set(&mut pfds[..fds.len()], timeout)
}

/// Polls `pfds` (their `revents` then tell what is ready) until one is ready or `timeout`
/// passes. Returns the number of ready descriptors; 0 on timeout or when a signal interrupts.
pub fn poll_set(pfds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `pfds` is a live, initialised slice of pollfd structs for the whole call; `tsp` is
    // null or points at a live timespec; a null sigmask leaves the signal mask unchanged.
    let n = unsafe { libc::ppoll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, tsp, std::ptr::null()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(0) } else { Err(e) };
    }
    Ok(n as usize)
}

/// Blocks until `fd` is readable or `timeout` passes.
pub fn wait_readable(fd: &impl AsRawFd, timeout: Option<Duration>) -> io::Result<()> {
    poll_readable(&[fd.as_raw_fd()], timeout).map(|_| ())
}

/// An epoll instance.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    /// Opens a new epoll instance, closed on exec.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall; wrapped at once.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: epoll_create1 just returned this descriptor.
        Ok(Epoll { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Watches `fd` for `events` (`EPOLLIN`, ...); each readiness reports `data`. `fd` must not
    /// already be watched (use [`modify`](Self::modify)), and must stay open while it is.
    pub fn add(&self, fd: RawFd, events: u32, data: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: data };
        // SAFETY: `ev` is a valid epoll_event for the call.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
        Ok(())
    }

    /// Changes the events watched on `fd`, and the data they report.
    pub fn modify(&self, fd: RawFd, events: u32, data: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: data };
        // SAFETY: `ev` is a valid epoll_event for the call.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_MOD, fd, &mut ev) })?;
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

impl AsRawFd for Epoll {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// `epoll_wait`'s timeout: milliseconds rounded up (-1 for none).
fn timeout_ms(timeout: Option<Duration>) -> libc::c_int {
    match timeout {
        None => -1,
        Some(d) => d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventFd;

    #[test]
    fn poll_times_out_then_sees_data() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let t = std::time::Instant::now();
        assert_eq!(poll_readable(&[a.as_raw_fd()], Some(Duration::from_millis(2))).unwrap(), 0);
        assert!(t.elapsed() >= Duration::from_millis(2));
        use std::io::Write;
        (&b).write_all(b"x").unwrap();
        assert_eq!(poll_readable(&[a.as_raw_fd(), b.as_raw_fd()], Some(Duration::from_secs(5))).unwrap(), 1);
        wait_readable(&a, Some(Duration::from_secs(5))).unwrap();
    }

    #[test]
    fn epoll_wait_fallback_waits_out_its_timeout_and_reports_events() {
        assert_eq!(timeout_ms(None), -1);
        assert_eq!(timeout_ms(Some(Duration::from_nanos(1))), 1);
        assert_eq!(timeout_ms(Some(Duration::from_millis(3))), 3);
        assert_eq!(timeout_ms(Some(Duration::from_micros(3001))), 4);
        let ep = Epoll::new().unwrap();
        let bell = EventFd::new().unwrap();
        ep.add(bell.as_raw_fd(), libc::EPOLLIN as u32, 7).unwrap();
        let mut out = [libc::epoll_event { events: 0, u64: 0 }; 4];
        for pwait2 in [false, true] {
            let t = std::time::Instant::now();
            let n = ep.wait_with(&mut out, Some(Duration::from_micros(1500)), pwait2).unwrap();
            assert_eq!(n, 0);
            assert!(t.elapsed() >= Duration::from_micros(1500), "woke early: {:?}", t.elapsed());
            bell.ring();
            let n = ep.wait_with(&mut out, Some(Duration::from_secs(5)), pwait2).unwrap();
            assert_eq!(n, 1);
            assert_eq!({ out[0].u64 }, 7);
            bell.drain();
        }
    }
}
