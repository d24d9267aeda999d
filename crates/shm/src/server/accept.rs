//! The acceptor: a connection on the listening socket becomes a connection (credentials checked
//! against the policy, a fresh segment and doorbells handed over) served by one member of the
//! group, or is turned away.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Instant;

use lowlat_sys as sys;

use super::group::Group;
use super::{Connection, ConnectionId, PeerCred, ShmHandler, ShmServer, ShmServerConfig};
use crate::ring::{Consumer, Producer, Wake};
use crate::segment::{Hello, Segment, Status};

impl ShmServer {
    /// Answers every client waiting at the listener and places the connections admitted.
    pub(super) fn accept_all(&mut self, handler: &mut impl ShmHandler) {
        let ShmServer { listener, config, group, admitted, .. } = self;
        Door { listener: listener.as_ref().map(|(l, _)| l), config, group, admitted }.admit_waiting();
        self.place_admitted(handler);
    }

    /// Places the connections admitted (by [`accept_all`](Self::accept_all), or by a reply while
    /// it waited for room: [`Door`]).
    /// In the order they were admitted: the group's members take connections in turn.
    pub(super) fn place_admitted(&mut self, handler: &mut impl ShmHandler) {
        if self.admitted.is_empty() {
            return;
        }
        let mut admitted = std::mem::take(&mut self.admitted);
        for a in admitted.drain(..) {
            match a {
                Admitted::Connection(c) => self.place(c, handler),
                Admitted::Refused(peer) => handler.refused(peer),
            }
        }
        // Kept, emptied, with its room.
        self.admitted = admitted;
    }
}

/// A connection through its handshake: to be served, or turned away (told so). Held only
/// between a handshake and the connection's placing, so not boxed.
#[allow(clippy::large_enum_variant)]
pub(super) enum Admitted {
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
        peer,
        sock,
        doorbell,
        _result_bell: result_bell,
        _seg: seg,
    }))
}

/// A reply's way in for clients while it waits for room in a result ring: the serving thread
/// serves nothing else meanwhile, and a client that opens another connection (a slot it had
/// not used) while a large result streams to one of its own waits for this thread's handshake,
/// not reading the result the thread waits on; answered here, the client goes on. The
/// connections are placed once the reply is done ([`ShmServer::place_admitted`]).
pub(super) struct Door<'a> {
    pub listener: Option<&'a UnixListener>,
    pub config: &'a ShmServerConfig,
    pub group: &'a Group,
    pub admitted: &'a mut Vec<Admitted>,
}

impl Door<'_> {
    /// Answers every client waiting at the listener.
    pub fn admit_waiting(&mut self) {
        let Some(listener) = self.listener else { return };
        loop {
            match listener.accept() {
                Ok((sock, _)) => self.admitted.extend(handshake(self.config, self.group, sock)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // WouldBlock: all taken. Anything else (EMFILE...) is retried on the next event.
                Err(_) => return,
            }
        }
    }
}
