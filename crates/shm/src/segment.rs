//! One connection's shared segment: a sealed memfd holding the control blocks of the call ring and
//! the result ring on the first page, then the two data areas. Each process maps the data areas
//! twice back to back (see [`lowlat_sys::Mapping`]), so records never need splitting at the wrap.
//!
//! The layout travels in the handshake ([`Hello`]), never read back from the shared pages, so
//! a peer cannot change it after the fact.

use std::io;
use std::os::fd::OwnedFd;

use crate::ring::{RingControl, RingRef, CONTROL_SIZE, MAX_RING, MIN_RING};
use lowlat_sys::{self as sys, Mapping};

/// The system page size.
pub fn page_size() -> usize {
    sys::memory::page_size()
}

/// Sizes of one connection's rings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of the call ring's data area (a power of two and a page multiple, 4 KiB to 1 GiB).
    pub call_ring: usize,
    /// Bytes of the result ring's data area (a power of two and a page multiple, 4 KiB to 1 GiB).
    pub result_ring: usize,
}

impl Layout {
    /// Checks what a peer (or a configuration) claims: powers of two, page multiples, in range.
    pub fn validate(&self) -> Result<(), &'static str> {
        let page = page_size();
        for s in [self.call_ring, self.result_ring] {
            if !s.is_power_of_two() || !(MIN_RING..=MAX_RING).contains(&s) || s % page != 0 {
                return Err("ring size must be a power of two, a page multiple, 4 KiB to 1 GiB");
            }
        }
        Ok(())
    }

    fn control_len(&self) -> usize {
        page_size()
    }

    /// Total bytes of the memfd.
    pub fn segment_len(&self) -> usize {
        self.control_len() + self.call_ring + self.result_ring
    }
}

/// A mapped segment. Rings made from it (`call()`, `result()`) must not outlive it.
#[derive(Debug)]
pub struct Segment {
    layout: Layout,
    control: Mapping,
    call_data: Mapping,
    result_data: Mapping,
}

// SAFETY: a Segment owns its mappings outright; nothing in it is tied to a thread.
unsafe impl Send for Segment {}

impl Segment {
    /// Creates a sealed memfd for `layout` and maps it (server side).
    pub fn create(layout: Layout) -> io::Result<(Segment, OwnedFd)> {
        layout.validate().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let fd = sys::sealed_memfd("lowlat-shm", layout.segment_len())?;
        let seg = Segment::map(&fd, layout)?;
        Ok((seg, fd))
    }

    /// Maps a segment received from a peer, after checking its size and seals.
    pub fn map(fd: &OwnedFd, layout: Layout) -> io::Result<Segment> {
        layout.validate().map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if !sys::check_sealed(fd, layout.segment_len())? {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "segment is not sealed against resizing or has the wrong size",
            ));
        }
        let c = layout.control_len();
        Ok(Segment {
            layout,
            control: Mapping::new(fd, 0, c, false)?,
            call_data: Mapping::new(fd, c, layout.call_ring, true)?,
            result_data: Mapping::new(fd, c + layout.call_ring, layout.result_ring, true)?,
        })
    }

    /// The ring sizes the segment was made or checked with.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The call ring (client produces, server consumes).
    pub fn call(&self) -> RingRef {
        // SAFETY: the control page holds two control blocks at offsets 0 and CONTROL_SIZE (both
        // multiples of 64); the data mapping is doubled; all live as long as `self`, and callers
        // drop their rings before the segment (documented on the type).
        unsafe {
            RingRef::new(self.control.as_ptr().cast::<RingControl>(), self.call_data.as_ptr(), self.layout.call_ring)
        }
    }

    /// The result ring (server produces, client consumes).
    pub fn result(&self) -> RingRef {
        // SAFETY: as for `call`.
        unsafe {
            RingRef::new(
                self.control.as_ptr().add(CONTROL_SIZE).cast::<RingControl>(),
                self.result_data.as_ptr(),
                self.layout.result_ring,
            )
        }
    }

    /// Raw view of the whole mapped area for tests that play a hostile peer: the control page
    /// followed by both data areas (first copies only).
    pub fn regions(&self) -> [(*mut u8, usize); 3] {
        [
            (self.control.as_ptr(), self.layout.control_len()),
            (self.call_data.as_ptr(), self.layout.call_ring),
            (self.result_data.as_ptr(), self.layout.result_ring),
        ]
    }
}

/// The server's first and only message on the Unix socket, sent with the memfd and the doorbell
/// eventfd attached (or with nothing attached, as a refusal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Whether the server took the connection; only [`Status::Accepted`] comes with descriptors.
    pub status: Status,
    /// The peer's credentials as the server saw them.
    pub uid: u32,
    /// The peer's primary group id as the server saw it.
    pub gid: u32,
    /// The ring sizes of the segment attached (the server's configured sizes in a refusal).
    pub layout: Layout,
}

/// The server's answer to a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The connection is made: the memfd and the doorbell are attached.
    Accepted,
    /// The server's [`PeerPolicy`](crate::server::PeerPolicy) does not admit the client.
    Refused,
    /// The server holds as many connections as it allows.
    Busy,
}

/// Bytes of a [`Hello`] on the Unix socket.
pub const HELLO_LEN: usize = 32;
const HELLO_MAGIC: &[u8; 4] = b"LlSh";
/// 2: records stamped with their position and polled in place (no producer index); 3: a guard
/// after every record of more than one line (`ring::GUARD`), which moves every later record.
const HELLO_VERSION: u16 = 3;

impl Hello {
    /// The message as sent: magic `LlSh`, version (u16 LE), status (u16 LE: 0 accepted, 1 refused,
    /// 2 busy), uid, gid, call ring and result ring sizes (u32 LE each), eight zero bytes.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(HELLO_MAGIC);
        b[4..6].copy_from_slice(&HELLO_VERSION.to_le_bytes());
        let st: u16 = match self.status {
            Status::Accepted => 0,
            Status::Refused => 1,
            Status::Busy => 2,
        };
        b[6..8].copy_from_slice(&st.to_le_bytes());
        b[8..12].copy_from_slice(&self.uid.to_le_bytes());
        b[12..16].copy_from_slice(&self.gid.to_le_bytes());
        b[16..20].copy_from_slice(&(self.layout.call_ring as u32).to_le_bytes());
        b[20..24].copy_from_slice(&(self.layout.result_ring as u32).to_le_bytes());
        b
    }

    /// Reads a server's message; the error says what is not a lowlat shm server of this version.
    /// The layout is returned as sent: [`Layout::validate`] it before use.
    pub fn decode(b: &[u8]) -> Result<Hello, &'static str> {
        if b.len() != HELLO_LEN || &b[0..4] != HELLO_MAGIC {
            return Err("not a lowlat shm server");
        }
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        if u16_at(4) != HELLO_VERSION {
            return Err("unsupported handshake version");
        }
        let status = match u16_at(6) {
            0 => Status::Accepted,
            1 => Status::Refused,
            2 => Status::Busy,
            _ => return Err("unknown handshake status"),
        };
        Ok(Hello {
            status,
            uid: u32_at(8),
            gid: u32_at(12),
            layout: Layout { call_ring: u32_at(16) as usize, result_ring: u32_at(20) as usize },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::{Consumer, Producer, Wake};

    #[test]
    fn hello_round_trips_and_rejects_garbage() {
        let h =
            Hello { status: Status::Refused, uid: 7, gid: 9, layout: Layout { call_ring: 8192, result_ring: 4096 } };
        assert_eq!(Hello::decode(&h.encode()).unwrap(), h);
        assert!(Hello::decode(&[0u8; HELLO_LEN]).is_err());
        assert!(Hello::decode(&h.encode()[..10]).is_err());
        // A server of another ring format is refused, not misread.
        let mut older = h.encode();
        older[4..6].copy_from_slice(&2u16.to_le_bytes());
        assert_eq!(Hello::decode(&older).unwrap_err(), "unsupported handshake version");
    }

    #[test]
    fn records_wrap_contiguously_in_the_double_mapping() {
        let layout = Layout { call_ring: 4096, result_ring: 4096 };
        let (seg, fd) = Segment::create(layout).unwrap();
        let peer = Segment::map(&fd, layout).unwrap();
        let mut p = Producer::new(seg.call(), Wake::Futex);
        let mut c = Consumer::new(peer.call(), 1 << 20);
        // Messages of 1000 bytes march around the 4 KiB ring many times, crossing the end.
        for i in 0..100u32 {
            let msg: Vec<u8> = (0..1000u32).map(|j| (i * 7 + j) as u8).collect();
            p.send(&[&msg], 1 << 20, |_, _| -> Result<(), crate::ring::RingError> {
                panic!("consumer keeps up; never full")
            })
            .unwrap();
            assert!(c.poll().unwrap());
            assert_eq!(c.message(), &msg[..]);
            c.release();
        }
        assert!(Layout { call_ring: 3000, result_ring: 4096 }.validate().is_err());
    }
}
