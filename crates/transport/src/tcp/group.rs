//! Endpoints of one address as a group ([`TcpEndpoint::bind_group`]), each driven by a thread of
//! its own: the first listens and admits; each connection it admits goes to the members in turn,
//! and any member hands a connection to another with the frame it just read
//! ([`TcpEndpoint::hand_over`]), so that every frame of a connection reaches the member its peer's
//! frames belong to (the runtime sends all of a session's connections to the thread that holds
//! the session). A member takes what it is handed from its inbox when the inbox's eventfd, in its
//! epoll set, rings. The limits ([`TcpLimits`](super::TcpLimits)) bound the group: connections at
//! once, and per source, are counted across it.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::framing::Framing;
use super::server::{Conn, ConnId, TcpEndpoint};

/// The epoll token of a member's inbox.
pub(super) const INBOX_TOKEN: u64 = u64::MAX - 2;

/// What the members of a group share.
#[derive(Debug)]
pub(super) struct Group<F> {
    inboxes: lowlat_sys::event::Inboxes<Handed<F>>,
    /// Connections open across the group, in all and per source address.
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    all: usize,
    per_source: HashMap<IpAddr, usize>,
}

/// A connection handed over: the frame read from it last, which the new member serves first.
#[derive(Debug)]
pub(super) struct Handed<F> {
    conn: Conn<F>,
    frame: Vec<u8>,
}

impl<F> Group<F> {
    pub(super) fn new(members: usize) -> io::Result<Group<F>> {
        Ok(Group { inboxes: lowlat_sys::event::Inboxes::new(members)?, open: Mutex::new(Open::default()) })
    }

    pub(super) fn size(&self) -> usize {
        self.inboxes.members()
    }

    fn open(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Connections open across the group, and of them from `ip`.
    pub(super) fn count(&self, ip: IpAddr) -> (usize, usize) {
        let open = self.open();
        (open.all, open.per_source.get(&ip).copied().unwrap_or(0))
    }

    pub(super) fn opened(&self, ip: IpAddr) {
        let mut open = self.open();
        open.all += 1;
        *open.per_source.entry(ip).or_default() += 1;
    }

    pub(super) fn closed(&self, ip: IpAddr) {
        let mut open = self.open();
        open.all = open.all.saturating_sub(1);
        if let Some(n) = open.per_source.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                open.per_source.remove(&ip);
            }
        }
    }
}

impl<F: Framing> TcpEndpoint<F> {
    /// Listens at `addr` with `members` endpoints (at least one), each to be driven by a thread
    /// of its own: the first listens; connections are spread over all of them in turn as they are
    /// admitted. Member `i` is element `i`. The first's limits ([`with_limits`](Self::with_limits))
    /// are the group's: it admits every connection, counting the group's connections, and sets
    /// the time each has to be established; give every member the same, as their logs name them.
    pub fn bind_group(addr: SocketAddr, framing: F, members: usize) -> io::Result<Vec<TcpEndpoint<F>>> {
        let group = Arc::new(Group::new(members)?);
        let mut first = TcpEndpoint::bind_framed(addr, framing.clone())?;
        first.join(group.clone(), 0)?;
        let local = first.local_addr();
        let mut all = vec![first];
        for i in 1..group.size() {
            let mut e = TcpEndpoint::unbound(local, framing.clone(), None, group.clone())?;
            e.join(group.clone(), i)?;
            all.push(e);
        }
        Ok(all)
    }

    fn join(&mut self, group: Arc<Group<F>>, index: usize) -> io::Result<()> {
        self.epoll.add(group.inboxes.bell(index), libc::EPOLLIN as u32, INBOX_TOKEN)?;
        self.group = group;
        self.member = index as u16;
        Ok(())
    }

    /// Which member of its group this endpoint is (0 alone).
    pub fn member(&self) -> usize {
        usize::from(self.member)
    }

    /// Endpoints in this one's group (1 alone).
    pub fn members(&self) -> usize {
        self.group.size()
    }

    /// Where an admitted connection goes: the next member in turn, which may be this one.
    pub(super) fn place(&mut self, conn: Conn<F>) {
        let to = self.next_member % self.group.size();
        self.next_member = to + 1;
        if to == self.member() {
            self.install(conn, None);
        } else {
            self.group.inboxes.post(to, Handed { conn, frame: Vec::new() });
        }
    }

    /// Hands connection `id`, with `frame` (the frame just read from it, which the new member
    /// serves first), to member `to` of the group; here it is reported closed, as a connection
    /// that went. A member not in the group, or this one, is ignored (the frame is dropped).
    pub fn hand_over(&mut self, id: &ConnId, frame: &[u8], to: usize) {
        if to >= self.group.size() || to == self.member() {
            return;
        }
        if let Some(conn) = self.detach(id) {
            self.group.inboxes.post(to, Handed { conn, frame: frame.to_vec() });
            self.closed.push(*id);
        }
    }

    /// Takes the connections handed to this member.
    pub(super) fn take_inbox(&mut self) {
        for h in self.group.inboxes.take(self.member()) {
            let frame = (!h.frame.is_empty()).then_some(h.frame);
            self.install(h.conn, frame);
        }
    }

    /// Serves `conn` here from now on: a fresh id, its socket in this epoll set (closed if it
    /// cannot be added), `frame` the first to report from it.
    fn install(&mut self, mut conn: Conn<F>, frame: Option<Vec<u8>>) {
        let index = match self.conns.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        // Its id: this endpoint's count of connections (24 bits) under its member number.
        self.generations = self.generations.wrapping_add(1);
        conn.generation = self.generations & 0xFF_FFFF | u32::from(self.member) << 24;
        let mut events = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
        if !conn.queued.is_empty() {
            events |= libc::EPOLLOUT as u32;
        }
        if self.epoll.add(conn.sock.as_raw_fd(), events, index as u64).is_err() {
            self.group.closed(conn.peer.ip());
            return;
        }
        if let Some(t) = conn.establish_by {
            self.next_deadline = Some(self.next_deadline.map_or(t, |n: Instant| n.min(t)));
        }
        self.grown += conn.grown;
        self.conns[index] = Some(conn);
        if let Some(frame) = frame {
            self.handed_frames.push((index, frame));
        }
    }
}
