//! `xdp://`: lowlat frames over an AF_XDP socket, with lowlat's XDP program steering frames of
//! lowlat's EtherType into it and every other frame to the kernel.
//!
//! The socket owns a UMEM of [`NUM_FRAMES`] 4 KiB frames: the first half circulates through the
//! fill and RX rings (the kernel writes received frames into them), the second half through the
//! TX and completion rings. Zero-copy is tried first when asked for (drivers that support it
//! hand their DMA buffers to the UMEM); veth and most virtual devices refuse, and the socket falls
//! back to copy mode. need-wakeup is on: a system call is made only when the kernel says it is
//! waiting for one (always for copy-mode TX, whose transmission runs inside sendto).
//!
//! Everything read from the rings (indices, descriptors) comes from memory the kernel shares
//! with us and is checked before use: descriptors must point inside our UMEM and inside one
//! frame, completion addresses must be TX frames.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::bpf::{self, Link, Program, XdpMode, XskMap};
use crate::error::{Error, Result};
use crate::frame::{self, discovery, FrameType, CRC_LEN, HEADER_LEN};
use crate::ifinfo::IfInfo;
use crate::packet::{check_mtu, discovery_nonce, max_payload_for, Stats};
use crate::Mac;

/// Frames in the UMEM; half for receiving, half for sending.
pub const NUM_FRAMES: u32 = 256;
/// Bytes of each UMEM frame (one page): the most a frame's packet and headroom can take.
pub const FRAME_SIZE: u32 = 4096;
const RING_SIZE: u32 = 256;
/// Room the kernel keeps in front of a received frame in copy mode (XDP_PACKET_HEADROOM).
const KERNEL_HEADROOM: u32 = 256;

const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const PGOFF_RX: i64 = 0;
const PGOFF_TX: i64 = 0x8000_0000;
const PGOFF_FILL: i64 = 0x1_0000_0000;
const PGOFF_COMP: i64 = 0x1_8000_0000;
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
const XDP_RING_NEED_WAKEUP: u32 = 1;

/// Whether to try zero-copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZeroCopy {
    /// Try zero-copy, fall back to copy mode.
    Auto,
    /// Copy mode only.
    Never,
}

/// Options of an [`XdpSocket`].
#[derive(Clone, Copy, Debug)]
pub struct XdpConfig {
    /// Append a CRC32C to every frame and require one on every frame received: both ends must
    /// agree.
    pub checksum: bool,
    /// Receive queue to bind (veth: 0).
    pub queue: u32,
    /// XDP attach mode; None tries native (driver) first, then generic.
    pub mode: Option<XdpMode>,
    /// Whether to try zero-copy (the driver must support it).
    pub zero_copy: ZeroCopy,
    /// Answer discovery broadcasts with this interface's MAC (servers).
    pub answer_discovery: bool,
}

impl Default for XdpConfig {
    fn default() -> Self {
        XdpConfig { checksum: true, queue: 0, mode: None, zero_copy: ZeroCopy::Auto, answer_discovery: false }
    }
}

/// `struct xdp_mmap_offsets`, all zero until the kernel fills it in (XDP_MMAP_OFFSETS).
#[derive(Clone, Copy)]
struct MmapOffsets(libc::xdp_mmap_offsets);

impl Default for MmapOffsets {
    fn default() -> Self {
        let r = libc::xdp_ring_offset { producer: 0, consumer: 0, desc: 0, flags: 0 };
        MmapOffsets(libc::xdp_mmap_offsets { rx: r, tx: r, fr: r, cr: r })
    }
}

/// One mmap'ed ring of the socket.
struct Ring {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut u8,
    mask: u32,
    _map: lowlat_sys::RawMapping,
}

impl Ring {
    fn map(fd: RawFd, off: &libc::xdp_ring_offset, pgoff: i64, entry: usize, what: &'static str) -> Result<Ring> {
        let map_len = off.desc as usize + RING_SIZE as usize * entry;
        // The ring the kernel created for this socket, at its documented page offset, with the
        // length the kernel's offsets imply.
        let map = lowlat_sys::RawMapping::socket_ring(fd, pgoff, map_len, true).map_err(|e| Error::io(what, e))?;
        for o in [off.producer, off.consumer, off.flags] {
            if o as usize + 4 > off.desc as usize || o % 4 != 0 {
                return Err(Error::io(what, io::Error::other("kernel reported ring offsets out of range")));
            }
        }
        let base = map.as_ptr();
        // SAFETY: the offsets were checked to lie inside the mapping, 4-byte aligned.
        unsafe {
            Ok(Ring {
                producer: base.add(off.producer as usize) as *const AtomicU32,
                consumer: base.add(off.consumer as usize) as *const AtomicU32,
                flags: base.add(off.flags as usize) as *const AtomicU32,
                desc: base.add(off.desc as usize),
                mask: RING_SIZE - 1,
                _map: map,
            })
        }
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: points inside the live mapping (checked in `map`); shared with the kernel,
        // which accesses it atomically too.
        unsafe { &*self.producer }
    }
    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as for `prod`.
        unsafe { &*self.consumer }
    }
    fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `prod`.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }
    /// Entries the kernel produced that we have not consumed. Modular: a kernel (or corrupted)
    /// index can make this at most the ring size, never more.
    fn available(&self) -> u32 {
        let n = self.prod().load(Ordering::Acquire).wrapping_sub(self.cons().load(Ordering::Relaxed));
        n.min(RING_SIZE)
    }
    /// Free entries for us to produce into.
    fn free(&self) -> u32 {
        let used = self.prod().load(Ordering::Relaxed).wrapping_sub(self.cons().load(Ordering::Acquire));
        RING_SIZE.saturating_sub(used)
    }
    /// Reads the u64 entry at index `idx` (fill/completion rings).
    fn read_u64(&self, idx: u32) -> u64 {
        // SAFETY: (idx & mask) < RING_SIZE, so the 8-byte entry lies inside the mapping.
        unsafe { std::ptr::read_volatile(self.desc.add(((idx & self.mask) as usize) * 8) as *const u64) }
    }
    fn write_u64(&self, idx: u32, v: u64) {
        // SAFETY: as for `read_u64`; we own this entry until we publish the producer index.
        unsafe { std::ptr::write_volatile(self.desc.add(((idx & self.mask) as usize) * 8) as *mut u64, v) }
    }
    fn read_desc(&self, idx: u32) -> (u64, u32) {
        // SAFETY: (idx & mask) < RING_SIZE, so the 16-byte xdp_desc lies inside the mapping.
        let d = unsafe {
            std::ptr::read_volatile(self.desc.add(((idx & self.mask) as usize) * 16) as *const libc::xdp_desc)
        };
        (d.addr, d.len)
    }
    fn write_desc(&self, idx: u32, addr: u64, len: u32) {
        let d = libc::xdp_desc { addr, len, options: 0 };
        // SAFETY: as for `read_desc`; we own this entry until we publish the producer index.
        unsafe { std::ptr::write_volatile(self.desc.add(((idx & self.mask) as usize) * 16) as *mut libc::xdp_desc, d) }
    }
}

/// The UMEM area. Unmapped on drop, after the socket (and with it the kernel's reference) is
/// closed, by field order in [`Xsk`].
struct Umem {
    base: *mut u8,
    len: usize,
    _map: lowlat_sys::RawMapping,
}

/// The socket half: fd, rings and UMEM. Field order is drop order: rings, socket, then memory.
struct Xsk {
    rx: Ring,
    tx: Ring,
    fill: Ring,
    comp: Ring,
    fd: OwnedFd,
    umem: Umem,
    zero_copy: bool,
}

impl Xsk {
    fn create(info: &IfInfo, queue: u32, zero_copy: bool) -> Result<Xsk> {
        let fd = lowlat_sys::socket::socket(libc::AF_XDP, libc::SOCK_RAW, 0)
            .map_err(|e| Error::os("opening an AF_XDP socket", "CAP_NET_RAW", &info.name, e))?;
        let raw = fd.as_raw_fd();
        let len = (NUM_FRAMES * FRAME_SIZE) as usize;
        let map = lowlat_sys::RawMapping::anonymous(len).map_err(|e| Error::io("allocating the UMEM", e))?;
        let base = map.as_ptr();
        let umem = Umem { base, len, _map: map };
        let reg = libc::xdp_umem_reg {
            addr: base as u64,
            len: len as u64,
            chunk_size: FRAME_SIZE,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        let op = "registering the UMEM";
        lowlat_sys::setsockopt(raw, libc::SOL_XDP, XDP_UMEM_REG, &reg)
            .map_err(|e| Error::os(op, "CAP_NET_RAW", &info.name, e))?;
        for opt in [XDP_UMEM_FILL_RING, XDP_UMEM_COMPLETION_RING, XDP_RX_RING, XDP_TX_RING] {
            lowlat_sys::setsockopt(raw, libc::SOL_XDP, opt, &RING_SIZE)
                .map_err(|e| Error::io("sizing the AF_XDP rings", e))?;
        }
        let off: MmapOffsets = lowlat_sys::getsockopt(raw, libc::SOL_XDP, XDP_MMAP_OFFSETS)
            .map_err(|e| Error::io("reading the AF_XDP ring offsets", e))?;
        let off = off.0;
        let rx = Ring::map(raw, &off.rx, PGOFF_RX, 16, "mapping the RX ring")?;
        let tx = Ring::map(raw, &off.tx, PGOFF_TX, 16, "mapping the TX ring")?;
        let fill = Ring::map(raw, &off.fr, PGOFF_FILL, 8, "mapping the fill ring")?;
        let comp = Ring::map(raw, &off.cr, PGOFF_COMP, 8, "mapping the completion ring")?;
        // The receive half of the UMEM goes to the kernel before anything can arrive.
        let half = NUM_FRAMES / 2;
        let p = fill.prod().load(Ordering::Relaxed);
        for i in 0..half {
            fill.write_u64(p.wrapping_add(i), (i * FRAME_SIZE) as u64);
        }
        fill.prod().store(p.wrapping_add(half), Ordering::Release);

        let flags = XDP_USE_NEED_WAKEUP | if zero_copy { XDP_ZEROCOPY } else { XDP_COPY };
        lowlat_sys::socket::bind_xdp(raw, info.index, queue, flags)
            .map_err(|e| Error::os("binding the AF_XDP socket", "CAP_NET_RAW", &info.name, e))?;
        Ok(Xsk { rx, tx, fill, comp, fd, umem, zero_copy })
    }

    /// The frame holding a kernel-supplied (addr, len), if it lies inside one frame of our UMEM.
    fn frame(&self, addr: u64, len: u32) -> Option<&[u8]> {
        let chunk = addr & !(FRAME_SIZE as u64 - 1);
        let off = addr - chunk;
        if chunk >= self.umem.len as u64 || off + len as u64 > FRAME_SIZE as u64 {
            return None;
        }
        // SAFETY: the range was checked to lie inside one frame of the UMEM mapping; the kernel
        // handed this frame to us through the RX ring and does not write it until we return it
        // through the fill ring.
        Some(unsafe { std::slice::from_raw_parts(self.umem.base.add(addr as usize), len as usize) })
    }
}

/// An AF_XDP socket with lowlat's XDP program attached to its interface.
///
/// Not `Sync`: one thread drives it. Several threads share one through [`crate::shared`].
pub struct XdpSocket {
    // Field order is drop order: detach the program first, then close the socket.
    link: Link,
    mode: XdpMode,
    _prog: Program,
    _map: XskMap,
    xsk: Xsk,
    tx_free: Vec<u64>,
    info: IfInfo,
    cfg: XdpConfig,
    stats: Stats,
}

// SAFETY: the raw pointers refer to mappings owned by this value; moving it to another thread
// moves that ownership, and nothing else holds the pointers.
unsafe impl Send for XdpSocket {}

impl XdpSocket {
    /// Opens an AF_XDP socket on `iface` (queue `cfg.queue`) and attaches lowlat's program.
    pub fn open(iface: &str, cfg: XdpConfig) -> Result<XdpSocket> {
        let info = IfInfo::get(iface)?;
        check_mtu(&info, cfg.checksum)?;
        let largest = FRAME_SIZE - KERNEL_HEADROOM - frame::ETH_HEADER_LEN as u32;
        if info.mtu > largest {
            return Err(Error::TooLong { iface: iface.to_string(), len: info.mtu as usize, max: largest as usize });
        }
        // A socket closed just before on the same queue releases it from a kernel work queue,
        // a little later: EBUSY until then. Retry for a bounded moment.
        let give_up = Instant::now() + Duration::from_secs(1);
        let xsk = loop {
            let r = match cfg.zero_copy {
                ZeroCopy::Auto => Xsk::create(&info, cfg.queue, true).or_else(|_| Xsk::create(&info, cfg.queue, false)),
                ZeroCopy::Never => Xsk::create(&info, cfg.queue, false),
            };
            match r {
                Err(Error::Io { source, .. })
                    if source.raw_os_error() == Some(libc::EBUSY) && Instant::now() < give_up =>
                {
                    std::thread::sleep(Duration::from_millis(2));
                }
                r => break r?,
            }
        };
        let map = XskMap::new(cfg.queue + 1)?;
        map.set(cfg.queue, xsk.fd.as_raw_fd())?;
        let prog = Program::load_xdp("lowlat_xsk", &bpf::redirect_program(map.fd()))?;
        let (link, mode) = bpf::attach_best(&prog, info.index, iface, &info.driver, cfg.mode)?;
        let tx_free = (NUM_FRAMES / 2..NUM_FRAMES).map(|i| (i * FRAME_SIZE) as u64).collect();
        Ok(XdpSocket { link, mode, _prog: prog, _map: map, xsk, tx_free, info, cfg, stats: Stats::default() })
    }

    /// The interface's MAC: this socket's address.
    pub fn mac(&self) -> Mac {
        self.info.mac
    }
    /// The interface the socket is bound to.
    pub fn iface(&self) -> &IfInfo {
        &self.info
    }
    /// Its counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// Where the XDP program runs: in the driver or on the generic path.
    pub fn xdp_mode(&self) -> XdpMode {
        self.mode
    }
    /// The kernel granted zero-copy mode (else frames are copied into the UMEM).
    pub fn zero_copy(&self) -> bool {
        self.xsk.zero_copy
    }
    /// Whether frames carry (and must carry) the end-to-end CRC32C.
    pub fn checksum(&self) -> bool {
        self.cfg.checksum
    }

    /// The largest `head.len() + body.len()` one frame carries, in bytes.
    pub fn max_payload(&self) -> usize {
        max_payload_for(self.info.mtu, self.cfg.checksum)
    }
    /// The AF_XDP socket's descriptor: it polls readable when a frame may be waiting.
    pub fn raw_fd(&self) -> RawFd {
        self.xsk.fd.as_raw_fd()
    }
    /// Detaches the XDP program and closes the socket (what dropping does, spelled out).
    pub fn close(self) {
        drop(self.link);
    }

    /// Returns completed TX frames to the free list.
    fn reap(&mut self) {
        let comp = &self.xsk.comp;
        let n = comp.available();
        if n == 0 {
            return;
        }
        let c = comp.cons().load(Ordering::Relaxed);
        for i in 0..n {
            let addr = comp.read_u64(c.wrapping_add(i));
            let chunk = addr & !(FRAME_SIZE as u64 - 1);
            // Only TX frames can complete; anything else would hand a frame out twice.
            let tx_range = (NUM_FRAMES / 2 * FRAME_SIZE) as u64..(NUM_FRAMES * FRAME_SIZE) as u64;
            if tx_range.contains(&chunk) && self.tx_free.len() < (NUM_FRAMES / 2) as usize {
                self.tx_free.push(chunk);
            }
        }
        comp.cons().store(c.wrapping_add(n), Ordering::Release);
    }

    fn kick_tx(&self) -> Result<()> {
        if !self.xsk.tx.needs_wakeup() {
            return Ok(());
        }
        if let Err(e) = lowlat_sys::socket::kick_send(self.raw_fd()) {
            // Busy or out of buffers: the frames stay queued and go with the next kick.
            if !matches!(
                e.raw_os_error(),
                Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::EINTR)
            ) {
                return Err(Error::io("kicking the AF_XDP TX ring", e));
            }
        }
        Ok(())
    }

    /// Sends one DATA frame to `dst` carrying `head` then `body` (copied into a UMEM frame).
    pub fn send_to(&mut self, dst: Mac, head: &[u8], body: &[u8]) -> Result<()> {
        self.send_kind(dst, FrameType::Data, head, body)
    }

    /// Sends one frame of any kind (PING frames are what the XDP floor answers).
    pub fn send_kind(&mut self, dst: Mac, kind: FrameType, head: &[u8], body: &[u8]) -> Result<()> {
        let len = head.len() + body.len();
        if len > self.max_payload() {
            return Err(Error::TooLong { iface: self.info.name.clone(), len, max: self.max_payload() });
        }
        let addr = self.tx_frame()?;
        let crc = self.cfg.checksum;
        let total = HEADER_LEN + len + if crc { CRC_LEN } else { 0 };
        // SAFETY: `addr` is a TX frame from our free list (so neither the kernel nor anyone else
        // uses it), and `total` fits one frame (checked against max_payload and FRAME_SIZE).
        let out = unsafe { std::slice::from_raw_parts_mut(self.xsk.umem.base.add(addr as usize), total) };
        let written = frame::write(dst, self.info.mac, kind, crc, head, body, out);
        debug_assert_eq!(written, Some(total));
        let tx = &self.xsk.tx;
        // The TX ring has room: it is as large as the whole UMEM's TX half.
        debug_assert!(tx.free() > 0);
        let p = tx.prod().load(Ordering::Relaxed);
        tx.write_desc(p, addr, total as u32);
        tx.prod().store(p.wrapping_add(1), Ordering::Release);
        self.stats.tx_frames.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.kick_tx()
    }

    /// A free TX frame, waiting (bounded) for completions when all are in flight.
    fn tx_frame(&mut self) -> Result<u64> {
        // The common case reads no clock: a frame is free.
        if let Some(a) = self.tx_free.pop() {
            return Ok(a);
        }
        let give_up = Instant::now() + Duration::from_millis(100);
        loop {
            self.reap();
            if let Some(a) = self.tx_free.pop() {
                return Ok(a);
            }
            if Instant::now() > give_up {
                return Err(Error::TxRingFull { iface: self.info.name.clone() });
            }
            self.kick_tx()?;
            std::hint::spin_loop();
        }
    }

    /// Receives the next valid DATA or PING payload into `buf` without blocking. Same contract
    /// as [`crate::EthSocket::try_recv_from`].
    pub fn try_recv_from(&mut self, buf: &mut [u8]) -> Result<Option<(usize, Mac)>> {
        if buf.len() < self.max_payload() {
            return Err(Error::BufferTooSmall { len: buf.len(), need: self.max_payload() });
        }
        self.try_recv_with(|payload, src| {
            buf[..payload.len()].copy_from_slice(payload);
            (payload.len(), src)
        })
    }

    /// Hands the next valid DATA or PING payload to `f` where it lies in the UMEM (no copy),
    /// without blocking; the frame goes back to the kernel when `f` returns.
    pub fn try_recv_with<R>(&mut self, f: impl FnOnce(&[u8], Mac) -> R) -> Result<Option<R>> {
        let mut f = Some(f);
        loop {
            let rx = &self.xsk.rx;
            if rx.available() == 0 {
                if self.xsk.fill.needs_wakeup() {
                    self.wake_rx();
                }
                return Ok(None);
            }
            let c = rx.cons().load(Ordering::Relaxed);
            let (addr, len) = rx.read_desc(c);
            rx.cons().store(c.wrapping_add(1), Ordering::Release);
            let mut result = None;
            let mut reply = None;
            match self.xsk.frame(addr, len) {
                None => {
                    self.stats.rx_malformed.fetch_add(1, Ordering::Relaxed);
                }
                Some(fr) => match frame::parse(fr, self.cfg.checksum) {
                    Err(r) => self.stats.reject(r),
                    Ok(p) => {
                        self.stats.rx_frames.fetch_add(1, Ordering::Relaxed);
                        let payload = &fr[HEADER_LEN..HEADER_LEN + p.len];
                        match p.kind {
                            FrameType::Data | FrameType::Ping => {
                                result = f.take().map(|f| f(payload, p.src));
                            }
                            FrameType::Discover if self.cfg.answer_discovery => {
                                reply = discovery::decode(discovery::REQUEST, payload).map(|n| (p.src, n));
                            }
                            _ => {}
                        }
                    }
                },
            }
            self.refill(addr);
            if let Some((src, nonce)) = reply {
                let m = discovery::encode(discovery::REPLY, nonce);
                self.send_kind(src, FrameType::DiscoverReply, &m, &[])?;
                self.stats.discovery_answered.fetch_add(1, Ordering::Relaxed);
            }
            if result.is_some() {
                return Ok(result);
            }
        }
    }

    /// Gives a received frame back to the kernel.
    fn refill(&self, addr: u64) {
        let chunk = addr & !(FRAME_SIZE as u64 - 1);
        if chunk >= (NUM_FRAMES / 2 * FRAME_SIZE) as u64 {
            // Not one of ours to receive into (a corrupted descriptor): never hand it out.
            return;
        }
        let fill = &self.xsk.fill;
        if fill.free() == 0 {
            return;
        }
        let p = fill.prod().load(Ordering::Relaxed);
        fill.write_u64(p, chunk);
        fill.prod().store(p.wrapping_add(1), Ordering::Release);
    }

    fn wake_rx(&self) {
        lowlat_sys::socket::kick_recv(self.raw_fd());
    }

    /// Blocks until a frame may be ready or `timeout` passes.
    pub fn wait_readable(&self, timeout: Option<Duration>) -> Result<()> {
        lowlat_sys::poll_readable(&[self.raw_fd()], timeout)
            .map(|_| ())
            .map_err(|e| Error::io("waiting for a frame", e))
    }

    /// Finds the server: as [`crate::EthSocket::discover`].
    pub fn discover(&mut self, tries: u32, interval: Duration) -> Result<Mac> {
        let nonce = discovery_nonce()?;
        let msg = discovery::encode(discovery::REQUEST, nonce);
        for _ in 0..tries {
            self.send_kind(Mac::BROADCAST, FrameType::Discover, &msg, &[])?;
            let deadline = Instant::now() + interval;
            while Instant::now() < deadline {
                if let Some(src) = self.take_discover_reply(nonce) {
                    return Ok(src);
                }
                self.wait_readable(Some(deadline.saturating_duration_since(Instant::now())))?;
            }
        }
        Err(Error::NoPeer { iface: self.info.name.clone(), tries })
    }

    fn take_discover_reply(&mut self, nonce: u64) -> Option<Mac> {
        let mut found = None;
        while self.xsk.rx.available() > 0 {
            let rx = &self.xsk.rx;
            let c = rx.cons().load(Ordering::Relaxed);
            let (addr, len) = rx.read_desc(c);
            rx.cons().store(c.wrapping_add(1), Ordering::Release);
            if let Some(f) = self.xsk.frame(addr, len) {
                if let Ok(p) = frame::parse(f, self.cfg.checksum) {
                    let payload = &f[HEADER_LEN..HEADER_LEN + p.len];
                    if p.kind == FrameType::DiscoverReply && discovery::decode(discovery::REPLY, payload) == Some(nonce)
                    {
                        found = Some(p.src);
                    }
                }
            }
            self.refill(addr);
            if found.is_some() {
                break;
            }
        }
        found
    }
}
