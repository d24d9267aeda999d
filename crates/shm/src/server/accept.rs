//! The acceptor: a connection on the listening socket becomes a connection (credentials checked
//! against the policy, a fresh segment and doorbells handed over) served by one member of the
//! group, or is turned away.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Instant;

use lowlat_sys as sys;

use super::{Connection, ConnectionId, PeerCred, ShmHandler, ShmServer};
use crate::ring::{Consumer, Producer, Wake};
use crate::segment::{Hello, Segment, Status};

impl ShmServer {
    pub(super) fn accept_all(&mut self, handler: &mut impl ShmHandler) {
        loop {
            let Some((listener, _)) = &self.listener else { return };
            match listener.accept() {
                Ok((sock, _)) => self.admit(sock, handler),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // WouldBlock: all taken. Anything else (EMFILE...) is retried on the next event.
                Err(_) => return,
            }
        }
    }

    fn admit(&mut self, sock: UnixStream, handler: &mut impl ShmHandler) {
        let Ok((uid, gid, pid)) = sys::peer_cred(sock.as_raw_fd()) else {
            return;
        };
        let peer = PeerCred { uid, gid, pid };
        let mut hello = Hello { status: Status::Accepted, uid, gid, layout: self.config.layout };
        if !self.config.policy.allows(uid, gid) {
            hello.status = Status::Refused;
            let _ = sys::send_with_fds(sock.as_raw_fd(), &hello.encode(), &[]);
            handler.refused(peer);
            return;
        }
        if self.group.open() >= self.config.max_connections {
            hello.status = Status::Busy;
            let _ = sys::send_with_fds(sock.as_raw_fd(), &hello.encode(), &[]);
            return;
        }
        // A client that cannot be set up (no memory, no descriptors) just gets a hang-up.
        let Ok((seg, memfd)) = Segment::create(self.config.layout) else {
            return;
        };
        let Ok(doorbell) = sys::EventFd::new() else { return };
        // Rung for a client that waits for its result in an event loop (an async call).
        let Ok(result_bell) = sys::EventFd::new() else { return };
        let fds = [memfd.as_raw_fd(), doorbell.as_raw_fd(), result_bell.as_raw_fd()];
        if sys::send_with_fds(sock.as_raw_fd(), &hello.encode(), &fds).is_err() || sock.set_nonblocking(true).is_err() {
            return;
        }
        drop(memfd);
        let calls = Consumer::new(seg.call(), self.config.max_message);
        let results = Producer::new(seg.result(), Wake::FutexOrDoorbell(result_bell.as_raw_fd()));
        // Its id is given where it is installed (`group::install`).
        let id = ConnectionId::new(0, 0, 0);
        let c = Connection {
            id,
            calls,
            results,
            armed: false,
            last_active: Instant::now(),
            called_since_check: false,
            peer,
            sock,
            doorbell,
            _result_bell: result_bell,
            _seg: seg,
        };
        self.group.opened();
        self.place(c, handler);
    }
}
