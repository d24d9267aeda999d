//! The process and its threads: CPU placement, termination signals taken synchronously, and
//! stopping another process.

use std::io;
use std::time::Duration;

use crate::cvt;

/// Pins the calling thread to one CPU. Errors when the CPU does not exist or is not allowed.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    pin_thread(0, &[cpu])
}

/// Lets thread `tid` of this process (0: the calling thread) run only on `cpus`. Errors when one
/// does not exist, none is allowed, or `cpus` is empty.
pub fn pin_thread(tid: i32, cpus: &[usize]) -> io::Result<()> {
    if cpus.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no CPU to pin to"));
    }
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("no CPU {cpu}")));
        }
        // SAFETY: `cpu` is below CPU_SETSIZE, checked above.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `tid` names a thread (or 0, the caller); `set` is a valid cpu_set_t of the size
    // passed, only read.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's id (what [`pin_thread`] takes).
pub fn thread_id() -> i32 {
    // SAFETY: gettid takes nothing and cannot fail.
    unsafe { libc::gettid() }
}

/// The number of CPUs this process may run on.
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// An identifier of the calling thread's network namespace (the inode of its namespace file),
/// 0 if it cannot be read: sockets opened in different namespaces must not be shared.
pub fn net_namespace_id() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net").map(|m| m.ino()).unwrap_or(0)
}

/// The signals that ask a server to stop: SIGTERM, SIGINT and SIGHUP.
const TERMINATION: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];
/// The signals that tell a server to shed load (SIGUSR1) and to take calls again (SIGUSR2).
const LOAD: [libc::c_int; 2] = [libc::SIGUSR1, libc::SIGUSR2];

fn signal_set(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before the signals are added.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live sigset_t; the signal numbers are valid.
    unsafe {
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
    }
    set
}

/// Blocks the signals a server takes synchronously — SIGTERM, SIGINT and SIGHUP (stop), SIGUSR1
/// and SIGUSR2 (shed load, take calls again) — in the calling thread and in every thread it
/// starts afterwards, so that [`wait_termination`] and [`wait_server_signal`] take them: a
/// server then stops cleanly (its socket files removed, its rpcbind registrations withdrawn)
/// instead of dying with them, and no signal handler ever runs in the middle of a serving
/// thread. Call it before starting any thread.
pub fn block_server_signals() -> io::Result<()> {
    let set = signal_set(&[TERMINATION.as_slice(), LOAD.as_slice()].concat());
    // SAFETY: `set` is an initialised sigset_t; the old mask is not wanted (null).
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

fn wait_for(signals: &[libc::c_int], timeout: Duration) -> Option<i32> {
    let set = signal_set(signals);
    let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as _ };
    // SAFETY: `set` and `ts` are initialised and live for the call; no siginfo is wanted (null).
    let r = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
    (r > 0).then_some(r)
}

/// Waits at most `timeout` for SIGTERM, SIGINT or SIGHUP (blocked by [`block_server_signals`]);
/// returns its number, or None when none came.
pub fn wait_termination(timeout: Duration) -> Option<i32> {
    wait_for(&TERMINATION, timeout)
}

/// What a server was told by a signal ([`wait_server_signal`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerSignal {
    /// SIGTERM, SIGINT or SIGHUP (the number): stop.
    Stop(i32),
    /// SIGUSR1: shed load.
    Shed,
    /// SIGUSR2: take calls again.
    Resume,
}

/// Waits at most `timeout` for one of the signals [`block_server_signals`] blocked.
pub fn wait_server_signal(timeout: Duration) -> Option<ServerSignal> {
    Some(match wait_for(&[TERMINATION.as_slice(), LOAD.as_slice()].concat(), timeout)? {
        libc::SIGUSR1 => ServerSignal::Shed,
        libc::SIGUSR2 => ServerSignal::Resume,
        s => ServerSignal::Stop(s),
    })
}

/// Kills process `pid` at once (SIGKILL), as a crash would end it.
pub fn kill(pid: u32) -> io::Result<()> {
    signal(pid, libc::SIGKILL)
}

/// Sets how late the kernel may fire the calling thread's sleep timers (at least 1 ns; 50 µs by
/// default, to batch wake-ups): a thread that keeps a schedule measured in microseconds needs it
/// small. The setting is the thread's own and is inherited by threads it starts.
pub fn set_timer_slack(slack: Duration) -> io::Result<()> {
    // 0 would restore the default, not ask for none.
    let ns = libc::c_ulong::try_from(slack.as_nanos()).unwrap_or(libc::c_ulong::MAX).max(1);
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long by value and touches no memory of ours.
    cvt(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns, 0, 0, 0) })?;
    Ok(())
}

/// The calling thread's timer slack ([`set_timer_slack`]).
pub fn timer_slack() -> io::Result<Duration> {
    // SAFETY: PR_GET_TIMERSLACK reads no argument and returns the slack in ns.
    let ns = cvt(unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) })?;
    Ok(Duration::from_nanos(ns as u64))
}

/// CPU time the calling thread has used.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a live timespec; the thread CPU clock always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn signal(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid too large"))?;
    // SAFETY: kill(2) with a positive pid and a valid signal number has no memory effects.
    if unsafe { libc::kill(pid, sig) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Asks process `pid` to stop (SIGTERM).
pub fn terminate(pid: u32) -> io::Result<()> {
    signal(pid, libc::SIGTERM)
}

/// Suspends process `pid` (SIGSTOP) until [`resume`]: it runs nothing, spins on no CPU, and
/// keeps its sockets and memory as they are.
pub fn suspend(pid: u32) -> io::Result<()> {
    signal(pid, libc::SIGSTOP)
}

/// Lets a process [`suspend`]ed go on (SIGCONT); nothing for one that runs.
pub fn resume(pid: u32) -> io::Result<()> {
    signal(pid, libc::SIGCONT)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The state letter of process `pid` (`/proc/PID/stat`, the field after the name).
    fn state(pid: u32) -> char {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        stat.rsplit_once(") ").unwrap().1.chars().next().unwrap()
    }

    /// A child process killed and reaped however the test ends.
    struct Child(std::process::Child);

    impl Drop for Child {
        fn drop(&mut self) {
            let _ = kill(self.0.id());
            let _ = self.0.wait();
        }
    }

    #[test]
    fn a_suspended_process_stops_until_resumed() {
        let child = Child(std::process::Command::new("sleep").arg("30").spawn().unwrap());
        let pid = child.0.id();
        let until = |want: fn(char) -> bool| {
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while !want(state(pid)) {
                assert!(std::time::Instant::now() < deadline, "state {}", state(pid));
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        suspend(pid).unwrap();
        until(|s| s == 'T');
        resume(pid).unwrap();
        until(|s| s != 'T');
    }

    #[test]
    fn a_blocked_termination_signal_is_taken_synchronously() {
        // In a thread of its own: the mask is per thread, and the signal is sent to this thread
        // only, so the rest of the test process is untouched.
        let got = std::thread::spawn(|| {
            block_server_signals().unwrap();
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
    fn shed_and_resume_signals_are_told_apart_from_stop() {
        let got = std::thread::spawn(|| {
            block_server_signals().unwrap();
            let mut told = Vec::new();
            for s in [libc::SIGUSR1, libc::SIGUSR2, libc::SIGTERM] {
                // SAFETY: raising a signal the calling thread blocks only makes it pending there.
                unsafe { libc::pthread_kill(libc::pthread_self(), s) };
                told.push(wait_server_signal(Duration::from_secs(5)));
            }
            // A pending SIGUSR1 is not a termination.
            // SAFETY: as above.
            unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGUSR1) };
            told.push(wait_termination(Duration::from_millis(5)).map(ServerSignal::Stop));
            told.push(wait_server_signal(Duration::from_secs(5)));
            told
        })
        .join()
        .unwrap();
        use ServerSignal::*;
        assert_eq!(got, [Some(Shed), Some(Resume), Some(Stop(libc::SIGTERM)), None, Some(Shed)]);
    }

    #[test]
    fn timer_slack_is_set_per_thread() {
        let (before, set, after) = std::thread::spawn(|| {
            let before = timer_slack().unwrap();
            set_timer_slack(Duration::from_micros(2)).unwrap();
            let set = timer_slack().unwrap();
            set_timer_slack(Duration::ZERO).unwrap();
            (before, set, timer_slack().unwrap())
        })
        .join()
        .unwrap();
        assert!(before >= Duration::from_micros(1), "{before:?}");
        assert_eq!(set, Duration::from_micros(2));
        // Zero asks for the least, not the default.
        assert_eq!(after, Duration::from_nanos(1));
    }

    #[test]
    fn a_thread_cpu_clock_counts_its_own_work_only() {
        let (busy, idle) = std::thread::spawn(|| {
            let t0 = thread_cpu_time();
            let start = std::time::Instant::now();
            while start.elapsed() < Duration::from_millis(20) {
                std::hint::spin_loop();
            }
            let busy = thread_cpu_time() - t0;
            let t1 = thread_cpu_time();
            std::thread::sleep(Duration::from_millis(20));
            (busy, thread_cpu_time() - t1)
        })
        .join()
        .unwrap();
        // Spinning 20 ms of wall time uses CPU (less if the host took the CPU away); sleeping
        // uses next to none.
        assert!(busy >= Duration::from_millis(2), "{busy:?}");
        assert!(idle < Duration::from_millis(5), "{idle:?}");
    }

    #[test]
    fn pin_rejects_missing_cpu() {
        assert!(pin_to_cpu(100_000).is_err());
        pin_to_cpu(0).unwrap();
    }
}
