//! How other threads reach a serving thread: its doorbell (an eventfd it also waits on) and its
//! stop flag.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::Error;

/// Wakes a serving thread from another thread.
pub(crate) struct Doorbell {
    bell: lowlat_sys::EventFd,
    /// Set before ringing, so the serving thread's spin loop notices without a system call.
    attention: AtomicBool,
}

impl Doorbell {
    pub fn new() -> io::Result<Doorbell> {
        Ok(Doorbell { bell: lowlat_sys::EventFd::new()?, attention: AtomicBool::new(false) })
    }

    pub fn ring(&self) {
        self.attention.store(true, Ordering::Release);
        self.bell.ring();
    }

    /// Whether it rang since the last call (and quiets it).
    pub fn take(&self) -> bool {
        // A plain load first: this runs on every poll of a spinning server, and a swap is a
        // locked instruction even when there is nothing to take.
        if !self.attention.load(Ordering::Relaxed) || !self.attention.swap(false, Ordering::Acquire) {
            return false;
        }
        self.bell.drain();
        true
    }

    pub fn raw_fd(&self) -> RawFd {
        self.bell.as_raw_fd()
    }
}

/// State shared between one serving thread and the outside world.
pub(crate) struct EndpointShared {
    pub doorbell: Doorbell,
    pub stop: AtomicBool,
}

impl EndpointShared {
    pub fn new() -> Result<Arc<EndpointShared>, Error> {
        let doorbell = Doorbell::new().map_err(|e| Error::io("create eventfd", e))?;
        Ok(Arc::new(EndpointShared { doorbell, stop: AtomicBool::new(false) }))
    }

    /// Asks the serving thread to stop, and wakes it.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.doorbell.ring();
    }
}
