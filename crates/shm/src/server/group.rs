//! Servers of one path, each driven by its own thread ([`ShmServer::bind_group`]): the first
//! listens and admits; each connection it admits goes to the members in turn, and any member
//! hands a connection to another with its request unread ([`Reply::hand_over`]), so that every
//! request of a connection reaches the member its caller chose (the runtime sends all of a
//! session's connections to the thread that holds the session). A member takes what it is handed
//! from its inbox when the inbox's eventfd, in its epoll set, rings: at once when it sleeps,
//! within `EVENT_CHECK` when it spins.
//!
//! [`Reply::hand_over`]: super::Reply::hand_over

use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use lowlat_sys::{self as sys, Epoll};

use super::{tag, Connection, ConnectionId, ShmHandler, ShmServer, ShmServerConfig, TAG_DOORBELL, TAG_SOCKET};
use crate::error::{io_err, ShmError};

/// The epoll tag of a member's inbox (kind 0, the server's own descriptors, as the listener's
/// tag 0 is).
pub(super) const TAG_INBOX: u64 = 1 << 2;

/// What the members of a group share.
pub(super) struct Group {
    inboxes: sys::event::Inboxes<Connection>,
    /// Connections open across the group: what `max_connections` bounds.
    open: AtomicUsize,
}

impl Group {
    fn new(members: usize) -> Result<Group, ShmError> {
        Ok(Group { inboxes: sys::event::Inboxes::new(members).map_err(io_err("eventfd"))?, open: AtomicUsize::new(0) })
    }

    /// A group of one (a server bound alone).
    pub(super) fn alone() -> Result<Arc<Group>, ShmError> {
        Group::new(1).map(Arc::new)
    }

    pub(super) fn size(&self) -> usize {
        self.inboxes.members()
    }

    pub(super) fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    pub(super) fn opened(&self) {
        self.open.fetch_add(1, Ordering::AcqRel);
    }

    pub(super) fn closed(&self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ShmServer {
    /// Listens at `path` with `members` servers (at least one), each to be driven by a thread of
    /// its own: the first listens (and removes the socket file when dropped); connections are
    /// spread over all of them in turn as they are admitted, and `max_connections` bounds the
    /// group. Member `i` is element `i`.
    pub fn bind_group(
        path: impl AsRef<Path>,
        config: ShmServerConfig,
        members: usize,
    ) -> Result<Vec<ShmServer>, ShmError> {
        let group = Arc::new(Group::new(members)?);
        let mut first = ShmServer::bind(path.as_ref(), config.clone())?;
        first.join(group.clone(), 0)?;
        let mut all = vec![first];
        for i in 1..group.size() {
            let epoll = Epoll::new().map_err(io_err("epoll"))?;
            let mut s = ShmServer::unbound(path.as_ref().to_path_buf(), config.clone(), epoll, None, group.clone());
            s.join(group.clone(), i)?;
            all.push(s);
        }
        Ok(all)
    }

    /// Makes this server member `index` of `group`, watching its inbox.
    fn join(&mut self, group: Arc<Group>, index: usize) -> Result<(), ShmError> {
        self.epoll.add(group.inboxes.bell(index), libc::EPOLLIN as u32, TAG_INBOX).map_err(io_err("epoll"))?;
        self.group = group;
        self.member = index as u16;
        Ok(())
    }

    /// Which member of its group this server is (0 alone).
    pub fn member(&self) -> usize {
        usize::from(self.member)
    }

    /// Servers in this one's group (1 alone).
    pub fn members(&self) -> usize {
        self.group.size()
    }

    /// Where an admitted connection goes: the next member in turn, which may be this one.
    pub(super) fn place(&mut self, c: Connection, handler: &mut impl ShmHandler) {
        let to = self.next_member % self.group.size();
        self.next_member = to + 1;
        if to == self.member() {
            self.install(c, handler);
        } else {
            self.group.inboxes.post(to, c);
        }
    }

    /// Serves `c` here from now on: a fresh id, its descriptors in this epoll set, polled.
    /// Closed (dropped) if they cannot be added.
    pub(super) fn install(&mut self, mut c: Connection, handler: &mut impl ShmHandler) {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                self.generations.push(0);
                (self.slots.len() - 1) as u32
            }
        };
        let id = ConnectionId::new(index, self.generations[index as usize], self.member);
        let ok = self.epoll.add(c.doorbell.as_raw_fd(), libc::EPOLLIN as u32, tag(TAG_DOORBELL, id));
        let ok = ok.and_then(|_| {
            self.epoll.add(c.sock.as_raw_fd(), (libc::EPOLLIN | libc::EPOLLRDHUP) as u32, tag(TAG_SOCKET, id))
        });
        if ok.is_err() {
            self.epoll.delete(c.doorbell.as_raw_fd());
            self.free.push(index);
            self.group.closed();
            return;
        }
        c.id = id;
        c.armed = false;
        c.sleeping_flag().store(0, Ordering::SeqCst);
        c.last_active = std::time::Instant::now();
        let peer = c.peer;
        self.grown += c.grown;
        self.slots[index as usize] = Some(c);
        self.active.push(index);
        // Room, now, for every connection to move between the active and cool lists, so that
        // serving (which moves them) never allocates.
        let connections = self.active.len() + self.cool.len();
        self.cool.reserve(connections.saturating_sub(self.cool.len()));
        self.active.reserve(connections.saturating_sub(self.active.len()));
        handler.opened(id, peer);
    }

    /// Takes the connections handed to this member.
    pub(super) fn take_inbox(&mut self, handler: &mut impl ShmHandler) {
        for c in self.group.inboxes.take(self.member()) {
            self.install(c, handler);
        }
    }

    /// Hands the connection in slot `index` (its request held, unread) to member `to`; here it
    /// is reported closed, as a connection that went.
    pub(super) fn hand_over(&mut self, index: u32, to: usize, handler: &mut impl ShmHandler) {
        if to >= self.group.size() || to == self.member() {
            if let Some(Some(c)) = self.slots.get_mut(index as usize) {
                c.calls.release();
            }
            return;
        }
        let Some(c) = self.detach(index) else { return };
        let id = c.id;
        self.group.inboxes.post(to, c);
        handler.closed(id, &ShmError::Broken(format!("handed to member {to} of the group")));
    }

    /// Takes the connection in slot `index` out of this server (its descriptors out of the epoll
    /// set; the slot free for a later connection, under a new generation).
    pub(super) fn detach(&mut self, index: u32) -> Option<Connection> {
        let c = self.slots.get_mut(index as usize)?.take()?;
        if let Some(pos) = self.active.iter().position(|&i| i == index) {
            self.active.swap_remove(pos);
        }
        if let Some(pos) = self.cool.iter().position(|&i| i == index) {
            self.cool.swap_remove(pos);
        }
        if let Some(pos) = self.backlogged.iter().position(|&i| i == index) {
            self.backlogged.swap_remove(pos);
        }
        self.kept -= c.unsent.bytes();
        self.grown -= c.grown;
        // The client holds the same eventfd file: epoll would keep reporting it after our
        // close, so it must be removed explicitly.
        self.epoll.delete(c.doorbell.as_raw_fd());
        self.epoll.delete(c.sock.as_raw_fd());
        let slot = index as usize;
        self.generations[slot] = self.generations[slot].wrapping_add(1);
        self.free.push(index);
        Some(c)
    }
}
