//! Thin, safe wrappers over the few system calls the transports share.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

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

/// Pins the calling thread to one CPU. Errors when the CPU does not exist or is not allowed.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("no CPU {cpu}")));
    }
    // SAFETY: `cpu` is below CPU_SETSIZE, checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; `set` is a valid cpu_set_t of the size passed.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The number of CPUs this process may run on.
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// The signals that ask a server to stop: SIGTERM, SIGINT and SIGHUP.
fn termination_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before the signals are added.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live sigset_t; the signal numbers are valid.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGHUP);
    }
    set
}

/// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and in every thread it starts
/// afterwards, so that [`wait_termination`] takes them synchronously: a server then stops
/// cleanly (its socket files removed, its rpcbind registrations withdrawn) instead of dying with
/// them, and no signal handler ever runs in the middle of a serving thread. Call it before
/// starting any thread.
pub fn block_termination_signals() -> io::Result<()> {
    let set = termination_signals();
    // SAFETY: `set` is an initialised sigset_t; the old mask is not wanted (null).
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// Waits at most `timeout` for one of the signals [`block_termination_signals`] blocked; returns
/// its number, or None when none came.
pub fn wait_termination(timeout: Duration) -> Option<i32> {
    let set = termination_signals();
    let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as _ };
    // SAFETY: `set` and `ts` are initialised and live for the call; no siginfo is wanted (null).
    let r = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
    (r > 0).then_some(r)
}

/// Asks process `pid` to stop (SIGTERM).
pub fn terminate(pid: u32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid too large"))?;
    // SAFETY: kill(2) with a positive pid and a valid signal number has no memory effects.
    if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_termination_signal_is_taken_synchronously() {
        // In a thread of its own: the mask is per thread, and the signal is sent to this thread
        // only, so the rest of the test process is untouched.
        let got = std::thread::spawn(|| {
            block_termination_signals().unwrap();
            assert_eq!(wait_termination(Duration::from_millis(5)), None);
            // SAFETY: raising a signal the calling thread blocks only makes it pending there.
            unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGHUP) };
            wait_termination(Duration::from_secs(5))
        })
        .join()
        .unwrap();
        assert_eq!(got, Some(libc::SIGHUP));
    }

    #[test]
    fn poll_times_out_then_sees_data() {
        let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let t = std::time::Instant::now();
        assert_eq!(poll_readable(&[a.as_raw_fd()], Some(Duration::from_millis(2))).unwrap(), 0);
        assert!(t.elapsed() >= Duration::from_millis(2));
        b.send(b"x").unwrap();
        assert_eq!(poll_readable(&[a.as_raw_fd()], Some(Duration::from_secs(5))).unwrap(), 1);
    }

    #[test]
    fn pin_rejects_missing_cpu() {
        assert!(pin_to_cpu(100_000).is_err());
        pin_to_cpu(0).unwrap();
    }
}
