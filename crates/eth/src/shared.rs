//! One AF_XDP socket shared by several threads, with a mailbox per call slot.
//!
//! An interface queue takes one AF_XDP socket and one XDP program, but a lowlat client has one
//! channel per call slot, each driven by its own thread. So the threads share the socket behind
//! a mutex, and received frames are routed by the lowlat header's slot field:
//!
//! - whoever finds the socket free drains the RX ring; a frame for its own slot is copied
//!   straight into its buffer, a frame for another slot into that slot's mailbox (with a
//!   notification);
//! - a thread with nothing to do blocks: the first one polls the socket's descriptor (the
//!   "poller"), the others wait on a condition variable that the poller or a router signals.
//!
//! A handle learns its slot from the frames it sends (a client slot sends before it waits), and
//! follows it if it changes (a rebind from another slot's channel sends slot 0's bind request).
//! Frames for slots no handle claims are dropped and counted. This costs one lock per send and
//! per drain; the alternative, one socket per slot, is not possible on one queue.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use lowlat_proto::wire::HeaderView;

use crate::error::{Error, Result};
use crate::frame::FrameType;
use crate::xdp::{XdpConfig, XdpSocket};
use crate::Mac;

/// The slot a lowlat frame is for, which routes it to its handle's mailbox.
fn slot_of(payload: &[u8]) -> Option<u16> {
    HeaderView::slot_of(payload)
}

struct Mailbox {
    slot: Option<u16>,
    queue: VecDeque<(Vec<u8>, Mac)>,
}

#[derive(Default)]
struct Boxes {
    by_handle: HashMap<u64, Mailbox>,
    /// Buffers of delivered frames, reused (no allocation per frame in steady state).
    spare: Vec<Vec<u8>>,
    poller: bool,
}

/// A shared AF_XDP socket; see the module documentation.
pub struct SharedXdp {
    sock: Mutex<XdpSocket>,
    boxes: Mutex<Boxes>,
    cond: Condvar,
    fd: RawFd,
    /// Wakes the poller when a frame was routed to a mailbox (the ring it polls may be empty
    /// by then, so the socket alone would not wake it).
    doorbell: lowlat_sys::EventFd,
    mac: Mac,
    max_payload: usize,
    next_id: AtomicU64,
    /// Frames for slots no handle claims.
    pub unclaimed: AtomicU64,
    peer: Mutex<Option<Mac>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// (network namespace inode, interface name): what one AF_XDP socket is bound to.
type Key = (u64, String);

/// Sockets already open in this process.
static OPEN: Mutex<Vec<(Key, Weak<SharedXdp>)>> = Mutex::new(Vec::new());

impl SharedXdp {
    /// Shares `sock` among handles (prefer [`get_or_open`](Self::get_or_open), which gives one
    /// socket per interface and namespace, as an AF_XDP queue takes only one).
    pub fn new(sock: XdpSocket) -> Result<Arc<SharedXdp>> {
        Ok(Arc::new(SharedXdp {
            doorbell: lowlat_sys::EventFd::new().map_err(|e| Error::io("creating an eventfd", e))?,
            fd: sock.raw_fd(),
            mac: sock.mac(),
            max_payload: sock.max_payload(),
            sock: Mutex::new(sock),
            boxes: Mutex::new(Boxes::default()),
            cond: Condvar::new(),
            next_id: AtomicU64::new(0),
            unclaimed: AtomicU64::new(0),
            peer: Mutex::new(None),
        }))
    }

    /// The process's shared socket on `iface` (in the calling thread's namespace), opened with
    /// `cfg` if none is open yet.
    pub fn get_or_open(iface: &str, cfg: XdpConfig) -> Result<Arc<SharedXdp>> {
        let key = (lowlat_sys::process::net_namespace_id(), iface.to_string());
        let mut open = lock(&OPEN);
        open.retain(|(_, w)| w.strong_count() > 0);
        if let Some(s) = open.iter().find(|(k, _)| *k == key).and_then(|(_, w)| w.upgrade()) {
            let have = lock(&s.sock).checksum();
            if have != cfg.checksum {
                let have = if have { "on" } else { "off" };
                return Err(Error::ChecksumMismatch { iface: iface.to_string(), have });
            }
            return Ok(s);
        }
        let s = SharedXdp::new(XdpSocket::open(iface, cfg)?)?;
        open.push((key, Arc::downgrade(&s)));
        Ok(s)
    }

    /// A new handle with its own mailbox.
    pub fn handle(self: &Arc<Self>) -> XdpHandle {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        lock(&self.boxes).by_handle.insert(id, Mailbox { slot: None, queue: VecDeque::new() });
        XdpHandle { shared: self.clone(), id, slot: None }
    }

    /// The interface's MAC: the socket's address.
    pub fn mac(&self) -> Mac {
        self.mac
    }

    /// The largest payload one frame carries, in bytes.
    pub fn max_payload(&self) -> usize {
        self.max_payload
    }

    /// Runs `f` with the socket locked (statistics, configuration).
    pub fn with_socket<R>(&self, f: impl FnOnce(&mut XdpSocket) -> R) -> R {
        f(&mut lock(&self.sock))
    }

    /// The server's MAC, discovered once per socket.
    pub fn discover(&self, tries: u32, interval: Duration) -> Result<Mac> {
        let mut peer = lock(&self.peer);
        if let Some(p) = *peer {
            return Ok(p);
        }
        let p = lock(&self.sock).discover(tries, interval)?;
        *peer = Some(p);
        Ok(p)
    }
}

/// One thread's (one call slot's) view of a [`SharedXdp`].
pub struct XdpHandle {
    shared: Arc<SharedXdp>,
    id: u64,
    slot: Option<u16>,
}

impl Drop for XdpHandle {
    fn drop(&mut self) {
        lock(&self.shared.boxes).by_handle.remove(&self.id);
    }
}

impl XdpHandle {
    /// The socket this handle shares.
    pub fn shared(&self) -> &Arc<SharedXdp> {
        &self.shared
    }

    /// The slot this handle receives for (learnt from what it sends, or set here).
    pub fn set_slot(&mut self, slot: u16) {
        if self.slot != Some(slot) {
            self.slot = Some(slot);
            if let Some(m) = lock(&self.shared.boxes).by_handle.get_mut(&self.id) {
                m.slot = Some(slot);
            }
        }
    }

    /// Sends one DATA frame; a lowlat header in `head` tells the handle its slot.
    pub fn send_to(&mut self, dst: Mac, head: &[u8], body: &[u8]) -> Result<()> {
        if let Some(s) = slot_of(head) {
            self.set_slot(s);
        }
        lock(&self.shared.sock).send_kind(dst, FrameType::Data, head, body)
    }

    /// The next frame for this handle's slot, without blocking.
    pub fn try_recv_from(&mut self, buf: &mut [u8]) -> Result<Option<(usize, Mac)>> {
        let sh = &*self.shared;
        if buf.len() < sh.max_payload {
            return Err(Error::BufferTooSmall { len: buf.len(), need: sh.max_payload });
        }
        {
            let mut b = lock(&sh.boxes);
            let Boxes { by_handle, spare, .. } = &mut *b;
            if let Some((v, src)) = by_handle.get_mut(&self.id).and_then(|m| m.queue.pop_front()) {
                buf[..v.len()].copy_from_slice(&v);
                let n = v.len();
                spare.push(v);
                return Ok(Some((n, src)));
            }
        }
        // Someone else is draining (or sending): they route our frames to our mailbox.
        let Ok(mut sock) = sh.sock.try_lock() else {
            return Ok(None);
        };
        let mut routed = false;
        let mine = self.slot;
        let id = self.id;
        let result = loop {
            let got = sock.try_recv_with(|payload, src| {
                let slot = slot_of(payload);
                let mut b = lock(&sh.boxes);
                let Boxes { by_handle, spare, .. } = &mut *b;
                let mut claimed = false;
                for (hid, m) in by_handle.iter_mut() {
                    if *hid != id && slot.is_some() && m.slot == slot {
                        let mut v = spare.pop().unwrap_or_default();
                        v.clear();
                        v.extend_from_slice(payload);
                        m.queue.push_back((v, src));
                        claimed = true;
                        routed = true;
                    }
                }
                if slot.is_some() && slot == mine {
                    buf[..payload.len()].copy_from_slice(payload);
                    return Some((payload.len(), src));
                }
                if !claimed {
                    sh.unclaimed.fetch_add(1, Ordering::Relaxed);
                }
                None
            });
            match got {
                Err(e) => break Err(e),
                Ok(None) => break Ok(None),
                Ok(Some(Some(r))) => break Ok(Some(r)),
                Ok(Some(None)) => {}
            }
        };
        drop(sock);
        if routed {
            let b = lock(&sh.boxes);
            if b.poller {
                sh.doorbell.ring();
            }
            sh.cond.notify_all();
        }
        result
    }

    /// Sleeps until a frame may be ready for this handle, or `timeout` passes.
    pub fn block(&mut self, timeout: Option<Duration>) -> Result<()> {
        let sh = &*self.shared;
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut b = lock(&sh.boxes);
        if b.by_handle.get(&self.id).is_some_and(|m| !m.queue.is_empty()) {
            return Ok(());
        }
        if !b.poller {
            b.poller = true;
            drop(b);
            let r = lowlat_sys::poll_readable(&[sh.fd, sh.doorbell.as_raw_fd()], timeout);
            let mut b = lock(&sh.boxes);
            b.poller = false;
            sh.doorbell.drain();
            drop(b);
            // Others may now poll, or find what this thread is about to route to them.
            sh.cond.notify_all();
            return r.map(|_| ()).map_err(|e| Error::io("waiting for a frame", e));
        }
        // Bounded, so that a waiter takes over polling promptly if the poller is busy.
        let wait = deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_millis(10))
            .min(Duration::from_millis(10));
        let _ = sh.cond.wait_timeout(b, wait);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lowlat_proto::wire::{Header, Kind};

    #[test]
    fn slot_of_reads_only_lowlat_headers() {
        let mut head = Header::new(Kind::Result);
        head.slot = 0x0201;
        let mut h = head.to_bytes();
        assert_eq!(slot_of(&h), Some(0x0201));
        assert_eq!(slot_of(&h[..7]), None);
        h[0] = b'X';
        assert_eq!(slot_of(&h), None);
    }
}
