//! Eventfds: a counter one thread or process adds to and another waits on (a doorbell).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::cvt;

/// A non-blocking eventfd.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// Opens a new eventfd with its counter at zero, non-blocking and closed on exec.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain syscall; the descriptor is wrapped at once.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        // SAFETY: eventfd just returned this descriptor and nothing else owns it.
        Ok(EventFd { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Takes ownership of a descriptor received from a peer (over `SCM_RIGHTS`); the peer is
    /// trusted with nothing: a descriptor that is not an eventfd makes `ring` and `drain` fail
    /// harmlessly.
    pub fn from_owned(fd: OwnedFd) -> EventFd {
        EventFd { fd }
    }

    /// Adds one to the counter (a descriptor given by [`AsRawFd`] of another owner may be rung
    /// with [`ring_fd`]). A full counter (a peer ringing without end) is not an error: the reader
    /// is awake anyway.
    pub fn ring(&self) {
        ring_fd(self.fd.as_raw_fd());
    }

    /// Empties the counter; whether it had been rung.
    pub fn drain(&self) -> bool {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        n == 8 && v > 0
    }

    /// The descriptor, to hand to a peer.
    pub fn as_owned(&self) -> &OwnedFd {
        &self.fd
    }
}

/// Adds one to the eventfd `fd` (see [`EventFd::ring`]).
pub fn ring_fd(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64; a bad descriptor is an error return, nothing else.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rung_eventfd_is_readable_until_drained() {
        let e = EventFd::new().unwrap();
        assert!(!e.drain(), "nothing rung yet");
        e.ring();
        e.ring();
        assert_eq!(crate::poll_readable(&[e.as_raw_fd()], Some(std::time::Duration::ZERO)).unwrap(), 1);
        assert!(e.drain());
        assert_eq!(crate::poll_readable(&[e.as_raw_fd()], Some(std::time::Duration::ZERO)).unwrap(), 0);
    }
}
