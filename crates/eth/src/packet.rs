//! `eth://`: lowlat frames over an AF_PACKET socket bound to one interface and lowlat's EtherType.
//!
//! Sending gathers the frame header, lowlat's header and the body straight from the caller's
//! buffers with one sendmsg(2). Receiving comes in two flavours, chosen by
//! [`EthConfig::rx_ring`]: plain recv(2) into the socket's buffer, or a PACKET_MMAP (TPACKET_V2)
//! receive ring that the kernel fills and we read without a system call. Either way the payload
//! is copied once into the caller's buffer after the frame was validated (length, kind, CRC32C).

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::cbpf::{self, Filter};
use crate::error::{Error, Result};
use crate::frame::{self, discovery, FrameType, Reject, CRC_LEN, HEADER_LEN};
use crate::ifinfo::IfInfo;
use crate::Mac;

/// Frames up to this size (header and checksum included) are sent from one copy (see
/// `EthSocket::send_kind`): a cache line and a half, for a null or small call.
const SMALL_FRAME: usize = 96;

// linux/if_packet.h, kept here so as not to depend on which libc version exports them.
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const TPACKET_V2: libc::c_int = 1;
const PACKET_FANOUT: libc::c_int = 18;
const PACKET_FANOUT_DATA: libc::c_int = 22;
const PACKET_FANOUT_CBPF: u32 = 6;
const PACKET_FANOUT_FLAG_UNIQUEID: u32 = 0x2000;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
/// sizeof(struct tpacket2_hdr).
const TPACKET2_HDR_LEN: usize = 32;

/// The smallest payload the transports accept to work with: lowlat's header and a useful body.
pub const MIN_PAYLOAD: usize = 64;

/// Options of an [`EthSocket`].
#[derive(Clone, Copy, Debug)]
pub struct EthConfig {
    /// Append (and require) a CRC32C on every frame. On by default.
    pub checksum: bool,
    /// Receive through a PACKET_MMAP ring instead of recv(2) (the default: it is faster).
    pub rx_ring: bool,
    /// Kernel-side filter: this socket's slot and/or peer.
    pub filter: Filter,
    /// Answer discovery broadcasts with this interface's MAC (servers).
    pub answer_discovery: bool,
}

impl Default for EthConfig {
    fn default() -> Self {
        EthConfig {
            checksum: true,
            // The ring measured faster than recv(2) across veth (p50 4.7 vs 6.0 µs, busy-polling).
            rx_ring: true,
            filter: Filter::default(),
            answer_discovery: false,
        }
    }
}

/// Counters of one socket, readable while it runs.
#[derive(Debug, Default)]
pub struct Stats {
    /// Frames received and accepted.
    pub rx_frames: AtomicU64,
    /// Frames sent.
    pub tx_frames: AtomicU64,
    /// Frames dropped because their CRC32C did not match (or was missing while required).
    pub rx_bad_crc: AtomicU64,
    /// Frames dropped as short, truncated, of unknown kind, or too long for the caller's buffer.
    pub rx_malformed: AtomicU64,
    /// Discovery broadcasts this socket answered (servers only).
    pub discovery_answered: AtomicU64,
}

impl Stats {
    pub(crate) fn reject(&self, r: Reject) {
        match r {
            Reject::BadCrc | Reject::MissingCrc => &self.rx_bad_crc,
            _ => &self.rx_malformed,
        }
        .fetch_add(1, Ordering::Relaxed);
    }
}

enum Next {
    /// Nothing queued.
    Empty,
    /// A frame was taken but was invalid or our own.
    Skipped,
    Frame(frame::Parsed),
}

/// An AF_PACKET socket carrying lowlat frames on one interface.
pub struct EthSocket {
    fd: OwnedFd,
    info: IfInfo,
    cfg: EthConfig,
    ring: Option<RxRing>,
    buf: Vec<u8>,
    stats: Stats,
}

pub(crate) fn attach_filter(fd: RawFd, f: &Filter) -> io::Result<()> {
    let mut prog = cbpf::compile(f);
    let fprog = libc::sock_fprog { len: prog.len() as libc::c_ushort, filter: prog.as_mut_ptr() };
    // The kernel copies the program during the call; `prog` outlives it.
    lowlat_sys::setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog)
}

/// Maximum lowlat payload per frame on an interface of this MTU.
pub fn max_payload_for(mtu: u32, checksum: bool) -> usize {
    let shim = HEADER_LEN - frame::ETH_HEADER_LEN;
    let crc = if checksum { CRC_LEN } else { 0 };
    (mtu as usize).saturating_sub(shim + crc).min(u16::MAX as usize)
}

pub(crate) fn check_mtu(info: &IfInfo, checksum: bool) -> Result<usize> {
    let max = max_payload_for(info.mtu, checksum);
    if max < MIN_PAYLOAD {
        let extra = (HEADER_LEN - frame::ETH_HEADER_LEN) + if checksum { CRC_LEN } else { 0 };
        return Err(Error::MtuTooSmall {
            iface: info.name.clone(),
            mtu: info.mtu,
            need: (MIN_PAYLOAD + extra) as u32,
            what: "a lowlat frame (64-byte payload, shim and checksum)",
        });
    }
    Ok(max)
}

impl EthSocket {
    /// Opens an AF_PACKET socket on `iface` (in the calling thread's network namespace).
    pub fn open(iface: &str, cfg: EthConfig) -> Result<EthSocket> {
        let info = IfInfo::get(iface)?;
        check_mtu(&info, cfg.checksum)?;
        // Protocol 0: the socket receives nothing until bound, so no unfiltered frame can slip
        // in before the filter is attached.
        let fd = lowlat_sys::socket::socket(libc::AF_PACKET, libc::SOCK_RAW, 0)
            .map_err(|e| Error::os("opening an AF_PACKET socket", "CAP_NET_RAW", iface, e))?;
        let raw = fd.as_raw_fd();
        // Without this the socket would also see every frame it sends. Kernels before 4.20 lack
        // the option; there the receive path drops our own frames by source MAC instead.
        let _ = lowlat_sys::setsockopt(raw, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &1i32);
        // lowlat does its own pacing; the qdisc layer only adds latency.
        let _ = lowlat_sys::setsockopt(raw, libc::SOL_PACKET, PACKET_QDISC_BYPASS, &1i32);
        if !cfg.filter.is_empty() {
            attach_filter(raw, &cfg.filter).map_err(|e| Error::io("attaching the slot filter", e))?;
        }
        let ring = if cfg.rx_ring { Some(RxRing::new(raw, info.mtu)?) } else { None };
        lowlat_sys::socket::bind_packet(raw, info.index, frame::ETHERTYPE)
            .map_err(|e| Error::os("binding the AF_PACKET socket", "CAP_NET_RAW", iface, e))?;
        let buf = vec![0u8; info.mtu as usize + frame::ETH_HEADER_LEN + 64];
        Ok(EthSocket { fd, info, cfg, ring, buf, stats: Stats::default() })
    }

    /// The interface's MAC: this socket's address.
    pub fn mac(&self) -> Mac {
        self.info.mac
    }

    /// The interface the socket is bound to.
    pub fn iface(&self) -> &IfInfo {
        &self.info
    }

    /// The settings it was opened with.
    pub fn config(&self) -> &EthConfig {
        &self.cfg
    }

    /// Its counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The largest `head.len() + body.len()` one frame carries.
    pub fn max_payload(&self) -> usize {
        max_payload_for(self.info.mtu, self.cfg.checksum)
    }

    /// Replaces the kernel-side filter (e.g. once discovery has found the peer).
    pub fn set_filter(&mut self, f: Filter) -> Result<()> {
        attach_filter(self.fd.as_raw_fd(), &f).map_err(|e| Error::io("attaching the slot filter", e))?;
        self.cfg.filter = f;
        Ok(())
    }

    /// Makes this socket the first of a new fanout group (`PACKET_FANOUT_CBPF`) whose frames
    /// `steering` spreads over its members (the kernel takes what it returns modulo the
    /// members, numbered in the order they joined; see `cbpf::steering`); returns the group's
    /// id, which the kernel chose unique in the network namespace. Once in a group, a socket
    /// receives only the frames the program gives it.
    pub fn start_fanout(&self, steering: &[libc::sock_filter]) -> Result<u16> {
        let fd = self.fd.as_raw_fd();
        let what = |e| Error::io("starting a PACKET_FANOUT group", e);
        let arg = (PACKET_FANOUT_CBPF | PACKET_FANOUT_FLAG_UNIQUEID) << 16;
        lowlat_sys::setsockopt(fd, libc::SOL_PACKET, PACKET_FANOUT, &arg).map_err(what)?;
        let got: u32 = lowlat_sys::getsockopt(fd, libc::SOL_PACKET, PACKET_FANOUT).map_err(what)?;
        let mut prog = steering.to_vec();
        let fprog = libc::sock_fprog { len: prog.len() as libc::c_ushort, filter: prog.as_mut_ptr() };
        // The kernel copies the program during the call; `prog` outlives it.
        lowlat_sys::setsockopt(fd, libc::SOL_PACKET, PACKET_FANOUT_DATA, &fprog).map_err(what)?;
        Ok(got as u16)
    }

    /// Joins the fanout group `id` another socket of this process started on this interface
    /// ([`start_fanout`](Self::start_fanout)), as its next member.
    pub fn join_fanout(&self, id: u16) -> Result<()> {
        let arg = u32::from(id) | PACKET_FANOUT_CBPF << 16;
        lowlat_sys::setsockopt(self.fd.as_raw_fd(), libc::SOL_PACKET, PACKET_FANOUT, &arg)
            .map_err(|e| Error::io("joining a PACKET_FANOUT group", e))
    }

    /// Sends one DATA frame to `dst` carrying `head` then `body`, gathered without copying.
    pub fn send_to(&self, dst: Mac, head: &[u8], body: &[u8]) -> Result<()> {
        self.send_kind(dst, FrameType::Data, head, body)
    }

    /// Sends one frame of any kind (PING frames are what the XDP floor answers).
    pub fn send_kind(&self, dst: Mac, kind: FrameType, head: &[u8], body: &[u8]) -> Result<()> {
        let len = head.len() + body.len();
        if len > self.max_payload() {
            return Err(Error::TooLong { iface: self.info.name.clone(), len, max: self.max_payload() });
        }
        let checksum = self.cfg.checksum;
        let total = HEADER_LEN + len + if checksum { CRC_LEN } else { 0 };
        // A small frame (a null call's, a small call's) is copied whole into one buffer, so that
        // its checksum is one pass over it; a larger one is gathered where it lies.
        let mut small = [0u8; SMALL_FRAME];
        if let Some(n) = frame::write(dst, self.info.mac, kind, checksum, head, body, &mut small) {
            return self.sendmsg(&[IoSlice::new(&small[..n])], total);
        }
        let hdr = frame::header(dst, self.info.mac, kind, checksum, len as u16);
        let crc = if checksum { frame::checksum(&hdr[frame::ETH_HEADER_LEN..], &[head, body]) } else { 0 };
        let crc = crc.to_le_bytes();
        let iovs = [IoSlice::new(&hdr), IoSlice::new(head), IoSlice::new(body), IoSlice::new(&crc)];
        self.sendmsg(&iovs[..if checksum { 4 } else { 3 }], total)
    }

    fn sendmsg(&self, iovs: &[IoSlice<'_>], total: usize) -> Result<()> {
        loop {
            // The socket is bound, so no destination address is needed.
            match lowlat_sys::socket::send_gathered(self.fd.as_raw_fd(), iovs) {
                Ok(n) => {
                    debug_assert_eq!(n, total);
                    self.stats.tx_frames.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("sending a frame", e)),
            }
        }
    }

    /// Sends a complete Ethernet frame exactly as given (fault injection, tests).
    pub fn send_raw_frame(&self, frame: &[u8]) -> Result<()> {
        self.sendmsg(&[IoSlice::new(frame)], frame.len())
    }

    /// Receives the next valid DATA or PING payload into `buf` without blocking: its length and
    /// sender. Invalid frames are dropped and counted; discovery requests are answered when
    /// configured. `buf` must hold [`max_payload`](Self::max_payload) bytes.
    pub fn try_recv_from(&mut self, buf: &mut [u8]) -> Result<Option<(usize, Mac)>> {
        if buf.len() < self.max_payload() {
            return Err(Error::BufferTooSmall { len: buf.len(), need: self.max_payload() });
        }
        loop {
            let next = self.next_frame(|f, p| {
                if matches!(p.kind, FrameType::Data | FrameType::Ping) {
                    buf[..p.len].copy_from_slice(&f[HEADER_LEN..HEADER_LEN + p.len]);
                }
            })?;
            match next {
                Next::Empty => return Ok(None),
                Next::Frame(p) if matches!(p.kind, FrameType::Data | FrameType::Ping) => {
                    return Ok(Some((p.len, p.src)))
                }
                _ => {}
            }
        }
    }

    /// Takes one frame off the socket, validates it, hands a valid one to `use_frame`, and
    /// answers discovery requests when configured.
    fn next_frame(&mut self, use_frame: impl FnOnce(&[u8], &frame::Parsed)) -> Result<Next> {
        let require = self.cfg.checksum;
        let own = self.info.mac;
        let stats = &self.stats;
        let mut parsed = None;
        let mut discover = None;
        let mut use_frame = Some(use_frame);
        let mut consume = |f: &[u8]| match frame::parse(f, require) {
            // Our own frames, on kernels that cannot be told to hide them.
            Ok(p) if p.src == own => {}
            Ok(p) => {
                stats.rx_frames.fetch_add(1, Ordering::Relaxed);
                if p.kind == FrameType::Discover {
                    let body = &f[HEADER_LEN..HEADER_LEN + p.len];
                    discover = discovery::decode(discovery::REQUEST, body).map(|n| (p.src, n));
                }
                if let Some(u) = use_frame.take() {
                    u(f, &p);
                }
                parsed = Some(p);
            }
            Err(r) => stats.reject(r),
        };
        let got = match &mut self.ring {
            Some(ring) => ring.take(&mut consume),
            None => recv_into(self.fd.as_raw_fd(), &mut self.buf, &mut consume, &self.stats)?,
        };
        if !got {
            return Ok(Next::Empty);
        }
        if let Some((src, nonce)) = discover {
            if self.cfg.answer_discovery {
                let m = discovery::encode(discovery::REPLY, nonce);
                self.send_kind(src, FrameType::DiscoverReply, &m, &[])?;
                self.stats.discovery_answered.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(parsed.map_or(Next::Skipped, Next::Frame))
    }

    /// The socket's descriptor, for poll(2).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Blocks until a frame may be ready or `timeout` passes.
    pub fn wait_readable(&self, timeout: Option<Duration>) -> Result<()> {
        lowlat_sys::poll_readable(&[self.fd.as_raw_fd()], timeout)
            .map(|_| ())
            .map_err(|e| Error::io("waiting for a frame", e))
    }

    /// Finds the server on this link: broadcasts a discovery request up to `tries` times,
    /// waiting `interval` for an answer after each. DATA frames arriving meanwhile are dropped.
    pub fn discover(&mut self, tries: u32, interval: Duration) -> Result<Mac> {
        let nonce = discovery_nonce()?;
        let msg = discovery::encode(discovery::REQUEST, nonce);
        let mut reply = [0u8; discovery::LEN];
        for _ in 0..tries {
            self.send_kind(Mac::BROADCAST, FrameType::Discover, &msg, &[])?;
            let deadline = Instant::now() + interval;
            loop {
                let mut found = None;
                let next = self.next_frame(|f, p| {
                    if p.kind == FrameType::DiscoverReply && p.len == discovery::LEN {
                        reply.copy_from_slice(&f[HEADER_LEN..HEADER_LEN + p.len]);
                        found = Some(p.src);
                    }
                })?;
                if let Some(src) = found {
                    if discovery::decode(discovery::REPLY, &reply) == Some(nonce) {
                        return Ok(src);
                    }
                }
                if matches!(next, Next::Empty) {
                    let now = Instant::now();
                    if now >= deadline {
                        break;
                    }
                    self.wait_readable(Some(deadline - now))?;
                }
            }
        }
        Err(Error::NoPeer { iface: self.info.name.clone(), tries })
    }
}

/// A discovery question's nonce: only answers carrying it are believed.
pub(crate) fn discovery_nonce() -> Result<u64> {
    lowlat_sys::random::u64().map_err(|e| Error::io("drawing a discovery nonce", e))
}

/// One recv(2) into `buf`; calls `consume` with the frame. False when nothing is queued.
fn recv_into(fd: RawFd, buf: &mut [u8], consume: &mut impl FnMut(&[u8]), stats: &Stats) -> Result<bool> {
    loop {
        let n = match lowlat_sys::socket::recv_truncating(fd, buf) {
            Ok(n) => n,
            Err(e) => match e.kind() {
                io::ErrorKind::WouldBlock => return Ok(false),
                io::ErrorKind::Interrupted => continue,
                _ => return Err(Error::io("receiving a frame", e)),
            },
        };
        if n > buf.len() {
            stats.rx_malformed.fetch_add(1, Ordering::Relaxed);
            return Ok(true);
        }
        consume(&buf[..n]);
        return Ok(true);
    }
}

/// A TPACKET_V2 receive ring shared with the kernel.
struct RxRing {
    map: *mut u8,
    _mapping: lowlat_sys::RawMapping,
    frame_size: usize,
    frame_nr: usize,
    next: usize,
}

// SAFETY: the ring is owned by one EthSocket and only touched through &mut self.
unsafe impl Send for RxRing {}

#[repr(C)]
struct TpacketReq {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
}

impl RxRing {
    fn new(fd: RawFd, mtu: u32) -> Result<RxRing> {
        lowlat_sys::setsockopt(fd, libc::SOL_PACKET, PACKET_VERSION, &TPACKET_V2)
            .map_err(|e| Error::io("selecting TPACKET_V2", e))?;
        // Room for the tpacket header, sockaddr_ll, alignment and the frame.
        let frame_size = (mtu as usize + frame::ETH_HEADER_LEN + 128).next_power_of_two().max(2048);
        let block_size = frame_size.max(4096);
        let per_block = block_size / frame_size;
        let block_nr = 256usize.div_ceil(per_block).max(1);
        let req = TpacketReq {
            block_size: block_size as u32,
            block_nr: block_nr as u32,
            frame_size: frame_size as u32,
            frame_nr: (block_nr * per_block) as u32,
        };
        lowlat_sys::setsockopt(fd, libc::SOL_PACKET, PACKET_RX_RING, &req)
            .map_err(|e| Error::io("creating the PACKET_MMAP ring", e))?;
        let map_len = block_size * block_nr;
        // The ring the kernel just created for this socket, at offset 0, with its exact length.
        let mapping = lowlat_sys::RawMapping::socket_ring(fd, 0, map_len, false)
            .map_err(|e| Error::io("mapping the PACKET_MMAP ring", e))?;
        let map = mapping.as_ptr();
        Ok(RxRing { map, _mapping: mapping, frame_size, frame_nr: block_nr * per_block, next: 0 })
    }

    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: frame `i` (< frame_nr) starts inside the mapping at a 16-byte aligned offset;
        // its first 4 bytes are tp_status, which the kernel also accesses atomically.
        unsafe { &*(self.map.add(i * self.frame_size) as *const AtomicU32) }
    }

    /// Hands the next filled frame to `consume` and returns it to the kernel.
    fn take(&mut self, consume: &mut impl FnMut(&[u8])) -> bool {
        let i = self.next;
        let st = self.status(i);
        if st.load(Ordering::Acquire) & TP_STATUS_USER == 0 {
            return false;
        }
        let base = i * self.frame_size;
        // SAFETY: the frame is ours (TP_STATUS_USER, acquired above) until we store
        // TP_STATUS_KERNEL; the whole frame lies inside the mapping.
        let f = unsafe { std::slice::from_raw_parts(self.map.add(base), self.frame_size) };
        let u32_at = |o: usize| u32::from_ne_bytes([f[o], f[o + 1], f[o + 2], f[o + 3]]);
        let len = u32_at(4) as usize;
        let snaplen = u32_at(8) as usize;
        let mac = u16::from_ne_bytes([f[12], f[13]]) as usize;
        // The offsets come from the kernel, but are checked like any shared-memory input.
        if mac >= TPACKET2_HDR_LEN && snaplen == len && mac + snaplen <= self.frame_size {
            consume(&f[mac..mac + snaplen]);
        } else {
            // Truncated to the ring's frame size or nonsensical: nothing to deliver.
            consume(&[]);
        }
        st.store(TP_STATUS_KERNEL, Ordering::Release);
        self.next = (i + 1) % self.frame_nr;
        true
    }
}
