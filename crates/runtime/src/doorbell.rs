//! How other threads reach a serving thread: its doorbell (an eventfd it also waits on), its
//! stop flag, and the board it publishes its counters on when asked.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::stats::StatsBoard;
use crate::Error;

/// Wakes a serving thread from another thread.
pub(crate) struct Doorbell {
    fd: OwnedFd,
    /// Set before ringing, so the serving thread's spin loop notices without a system call.
    attention: AtomicBool,
}

impl Doorbell {
    pub fn new() -> io::Result<Doorbell> {
        // SAFETY: plain system call; the result is checked before use.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor owned by nobody else.
        Ok(Doorbell { fd: unsafe { OwnedFd::from_raw_fd(fd) }, attention: AtomicBool::new(false) })
    }

    pub fn ring(&self) {
        self.attention.store(true, Ordering::Release);
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd we own.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
    }

    /// Whether it rang since the last call (and quiets it).
    pub fn take(&self) -> bool {
        // A plain load first: this runs on every poll of a spinning server, and a swap is a
        // locked instruction even when there is nothing to take.
        if !self.attention.load(Ordering::Relaxed) || !self.attention.swap(false, Ordering::Acquire) {
            return false;
        }
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from a non-blocking eventfd we own.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
        true
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// State shared between one serving thread and the outside world.
pub(crate) struct EndpointShared {
    pub doorbell: Doorbell,
    pub stop: AtomicBool,
    pub stats: StatsBoard,
}

impl EndpointShared {
    pub fn new() -> Result<Arc<EndpointShared>, Error> {
        let doorbell = Doorbell::new().map_err(|e| Error::io("create eventfd", e))?;
        Ok(Arc::new(EndpointShared { doorbell, stop: AtomicBool::new(false), stats: StatsBoard::default() }))
    }

    /// The serving thread's counters: asks for a copy, rings, and waits up to `patience` for it
    /// (the last copy published, if the thread is busy for longer).
    pub fn stats(&self, patience: std::time::Duration) -> crate::EndpointStats {
        let n = self.stats.ask();
        self.doorbell.ring();
        self.stats.wait(n, patience)
    }

    /// Asks the serving thread to stop, and wakes it.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.doorbell.ring();
    }
}
