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

/// The inboxes of a group of threads, each with an eventfd rung when something is posted to it
/// (a thread waits on its own in epoll beside its other descriptors): how the members of a group
/// of servers hand connections to one another.
#[derive(Debug)]
pub struct Inboxes<T> {
    boxes: Vec<(std::sync::Mutex<Vec<T>>, EventFd)>,
}

impl<T> Inboxes<T> {
    /// Inboxes for `members` threads (at least one).
    pub fn new(members: usize) -> io::Result<Inboxes<T>> {
        let boxes = (0..members.max(1)).map(|_| Ok((std::sync::Mutex::new(Vec::new()), EventFd::new()?)));
        Ok(Inboxes { boxes: boxes.collect::<io::Result<_>>()? })
    }

    /// How many members there are.
    pub fn members(&self) -> usize {
        self.boxes.len()
    }

    /// Puts `item` in member `to`'s inbox and rings its eventfd.
    pub fn post(&self, to: usize, item: T) {
        let (inbox, bell) = &self.boxes[to];
        inbox.lock().unwrap_or_else(|p| p.into_inner()).push(item);
        bell.ring();
    }

    /// Empties member `member`'s inbox (and its eventfd).
    pub fn take(&self, member: usize) -> Vec<T> {
        let (inbox, bell) = &self.boxes[member];
        bell.drain();
        std::mem::take(&mut *inbox.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The eventfd of member `member`'s inbox, to wait on.
    pub fn bell(&self, member: usize) -> RawFd {
        self.boxes[member].1.as_raw_fd()
    }
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

    /// What is posted to a member makes its bell readable and comes out of its inbox, in order,
    /// once; the other members' stay quiet.
    #[test]
    fn an_inbox_rings_its_member_only_and_empties_once_taken() {
        let zero = Some(std::time::Duration::ZERO);
        let boxes = Inboxes::new(3).unwrap();
        assert_eq!(boxes.members(), 3);
        boxes.post(1, "a");
        boxes.post(1, "b");
        assert_eq!(crate::poll_readable(&[boxes.bell(1)], zero).unwrap(), 1);
        assert_eq!(crate::poll_readable(&[boxes.bell(0), boxes.bell(2)], zero).unwrap(), 0);
        assert_eq!(boxes.take(1), ["a", "b"]);
        assert_eq!(crate::poll_readable(&[boxes.bell(1)], zero).unwrap(), 0);
        assert!(boxes.take(1).is_empty());
    }
}
