//! The acceptor: a connection on the listening socket becomes a connection (credentials checked
//! against the policy, a fresh segment and doorbells handed over) served by one member of the
//! group, or is turned away.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Instant;

use lowlat_sys as sys;

use super::group::Group;
use super::reply::Unsent;
use super::{Connection, ConnectionId, PeerCred, ShmHandler, ShmServer, ShmServerConfig};
use crate::ring::{Consumer, Producer, Wake};
use crate::segment::{Hello, Segment, Status};

impl ShmServer {
    /// Answers every client waiting at the listener and places the connections admitted.
    pub(super) fn accept_all(&mut self, handler: &mut impl ShmHandler) {
        loop {
            let Some((listener, _)) = &self.listener else { return };
            match listener.accept() {
                Ok((sock, _)) => match handshake(&self.config, &self.group, sock) {
                    Some(Admitted::Connection(c)) => self.place(c, handler),
                    Some(Admitted::Refused(peer)) => handler.refused(peer),
                    None => {}
                },
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // WouldBlock: all taken. Anything else (EMFILE...) is retried on the next event.
                Err(_) => return,
            }
        }
    }
}

/// A connection through its handshake: to be served, or turned away (told so). Held only
/// between a handshake and the connection's placing, so not boxed.
#[allow(clippy::large_enum_variant)]
enum Admitted {
    Connection(Connection),
    Refused(PeerCred),
}

/// Answers the handshake of a client at `sock`: a connection to place, a refusal, or nothing (a
/// client that cannot be set up, or is told the server is busy, just gets its answer or a
/// hang-up).
fn handshake(config: &ShmServerConfig, group: &Group, sock: UnixStream) -> Option<Admitted> {
    let (uid, gid, pid) = sys::peer_cred(sock.as_raw_fd()).ok()?;
    let peer = PeerCred { uid, gid, pid };
    let mut hello = Hello { status: Status::Accepted, uid, gid, layout: config.layout };
    if !config.policy.allows(uid, gid) {
        hello.status = Status::Refused;
        let _ = sys::send_with_fds(sock.as_raw_fd(), &hello.encode(), &[]);
        return Some(Admitted::Refused(peer));
    }
    if group.open() >= config.max_connections {
        hello.status = Status::Busy;
        let _ = sys::send_with_fds(sock.as_raw_fd(), &hello.encode(), &[]);
        return None;
    }
    // A client that cannot be set up (no memory, no descriptors) just gets a hang-up.
    let (seg, memfd) = Segment::create(config.layout).ok()?;
    let doorbell = sys::EventFd::new().ok()?;
    // Rung for a client that waits for its result in an event loop (an async call).
    let result_bell = sys::EventFd::new().ok()?;
    let fds = [memfd.as_raw_fd(), doorbell.as_raw_fd(), result_bell.as_raw_fd()];
    if sys::send_with_fds(sock.as_raw_fd(), &hello.encode(), &fds).is_err() || sock.set_nonblocking(true).is_err() {
        return None;
    }
    drop(memfd);
    let calls = Consumer::new(seg.call(), config.max_message);
    let results = Producer::new(seg.result(), Wake::FutexOrDoorbell(result_bell.as_raw_fd()));
    group.opened();
    // Its id is given where it is installed (`group::install`).
    Some(Admitted::Connection(Connection {
        id: ConnectionId::new(0, 0, 0),
        calls,
        results,
        armed: false,
        last_active: Instant::now(),
        called_since_check: false,
        unsent: Unsent::default(),
        grown: 0,
        peer,
        sock,
        doorbell,
        _result_bell: result_bell,
        _seg: seg,
    }))
}
