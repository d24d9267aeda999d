//! Just enough of the bpf(2) system call to load lowlat's XDP programs: hand-assembled eBPF
//! instructions, one XSKMAP, and XDP attachment through a bpf link.
//!
//! No clang and no BPF toolchain: the programs are a few dozen instructions, written here with
//! a tiny assembler and checked by the kernel's verifier at load time. A bpf link (rather than
//! the netlink attach) ties the attachment to a file descriptor, so the kernel detaches the
//! program when the descriptor is closed, including when the process dies.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::error::{Error, Result};

const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_LINK_CREATE: libc::c_int = 28;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;

/// XDP attach mode (linux/if_link.h): generic XDP, run by the kernel after the driver; works
/// on any interface (veth included), slower.
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// Attach in the driver (native XDP): fastest, where the driver supports it.
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// XDP verdict: drop the packet.
pub const XDP_DROP: i32 = 1;
/// Let the packet go on up the kernel's stack.
pub const XDP_PASS: i32 = 2;
/// Send the packet back out of the interface it came in on.
pub const XDP_TX: i32 = 3;

/// Helper (linux/bpf.h `__BPF_FUNC_MAPPER`) `bpf_redirect_map(map, key, flags)`: hand the
/// packet to the map's entry `key` (an AF_XDP socket).
pub const HELPER_REDIRECT_MAP: i32 = 51;
/// `bpf_get_prandom_u32()`: a pseudo-random 32-bit number in r0.
pub const HELPER_GET_PRANDOM_U32: i32 = 7;

/// One eBPF instruction, laid out as `struct bpf_insn`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    /// Opcode: class, size or source, and operation (`BPF_*` bits).
    pub code: u8,
    /// dst in the low nibble, src in the high nibble.
    pub regs: u8,
    /// Signed offset: of a memory access, or of a jump, in instructions.
    pub off: i16,
    /// Immediate operand.
    pub imm: i32,
}

/// A tiny assembler: one function per instruction form the programs use.
pub mod asm {
    use super::Insn;

    /// Register 0: return value of helpers and of the program.
    pub const R0: u8 = 0;
    /// Register 1: first helper argument; the `xdp_md` context on entry.
    pub const R1: u8 = 1;
    /// Register 2: second helper argument.
    pub const R2: u8 = 2;
    /// Register 3: third helper argument.
    pub const R3: u8 = 3;
    /// Register 4: fourth helper argument.
    pub const R4: u8 = 4;
    /// Register 5: fifth helper argument.
    pub const R5: u8 = 5;
    /// Register 6: callee-saved.
    pub const R6: u8 = 6;
    /// Register 7: callee-saved.
    pub const R7: u8 = 7;

    /// Access size: four bytes.
    pub const W: u8 = 0x00;
    /// Two bytes.
    pub const H: u8 = 0x08;
    /// One byte.
    pub const B: u8 = 0x10;

    const fn ins(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn { code, regs: (src << 4) | (dst & 0x0f), off, imm }
    }
    /// dst = *(size *)(src + off)
    pub const fn ldx(size: u8, dst: u8, src: u8, off: i16) -> Insn {
        ins(0x61 | size, dst, src, off, 0)
    }
    /// *(size *)(dst + off) = src
    pub const fn stx(size: u8, dst: u8, off: i16, src: u8) -> Insn {
        ins(0x63 | size, dst, src, off, 0)
    }
    /// dst = imm (64-bit register)
    pub const fn mov_imm(dst: u8, imm: i32) -> Insn {
        ins(0xb7, dst, 0, 0, imm)
    }
    /// dst = src
    pub const fn mov(dst: u8, src: u8) -> Insn {
        ins(0xbf, dst, src, 0, 0)
    }
    /// dst += imm
    pub const fn add_imm(dst: u8, imm: i32) -> Insn {
        ins(0x07, dst, 0, 0, imm)
    }
    /// dst &= imm
    pub const fn and_imm(dst: u8, imm: i32) -> Insn {
        ins(0x57, dst, 0, 0, imm)
    }
    /// dst ^= imm
    pub const fn xor_imm(dst: u8, imm: i32) -> Insn {
        ins(0xa7, dst, 0, 0, imm)
    }
    /// if dst > src (unsigned) goto +off
    pub const fn jgt(dst: u8, src: u8, off: i16) -> Insn {
        ins(0x2d, dst, src, off, 0)
    }
    /// if dst != imm goto +off
    pub const fn jne_imm(dst: u8, imm: i32, off: i16) -> Insn {
        ins(0x55, dst, 0, off, imm)
    }
    /// call helper
    pub const fn call(helper: i32) -> Insn {
        ins(0x85, 0, 0, 0, helper)
    }
    /// return r0
    pub const fn exit() -> Insn {
        ins(0x95, 0, 0, 0, 0)
    }
    /// dst = map (by fd): the two-slot ld_imm64 with BPF_PSEUDO_MAP_FD.
    pub const fn ld_map_fd(dst: u8, fd: i32) -> [Insn; 2] {
        [ins(0x18, dst, 1, 0, fd), ins(0, 0, 0, 0, 0)]
    }
}

/// bpf(2) with one of this module's attribute blocks.
fn sys_bpf<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: every attribute block built here is the `bpf_attr` variant its command reads,
    // zero-padded (`Default`), and the addresses in it (instructions, license, log, key, value)
    // lead to buffers of the lengths given beside them that outlive the call.
    unsafe { lowlat_sys::bpf::bpf(cmd, attr) }
}

/// [`sys_bpf`] for a command that returns a new descriptor.
fn sys_bpf_fd<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<OwnedFd> {
    // SAFETY: as in `sys_bpf`; callers pass only commands that return a descriptor.
    unsafe { lowlat_sys::bpf::bpf_fd(cmd, attr) }
}

fn privilege(op: &'static str, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => Error::Privilege { op, cap: "CAP_BPF and CAP_NET_ADMIN" },
        _ => Error::io(op, e),
    }
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
    pad: [u32; 8],
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    pad0: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    pad: [u64; 8],
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    pad: [u64; 6],
}

fn name16(s: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    for (d, b) in n.iter_mut().zip(s.bytes().take(15)) {
        *d = b;
    }
    n
}

/// An XSKMAP: XDP's table of AF_XDP sockets, indexed by receive queue.
pub struct XskMap {
    fd: OwnedFd,
}

impl XskMap {
    /// A new XSKMAP of `entries` queues (needs `CAP_BPF` and `CAP_NET_ADMIN`:
    /// [`Error::Privilege`] otherwise).
    pub fn new(entries: u32) -> Result<XskMap> {
        let mut a = MapCreateAttr {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: entries,
            map_name: name16("lowlat_xsks"),
            ..Default::default()
        };
        let fd = sys_bpf_fd(BPF_MAP_CREATE, &mut a).map_err(|e| privilege("creating the XSKMAP", e))?;
        Ok(XskMap { fd })
    }

    /// Points entry `queue` at the AF_XDP socket `xsk`.
    pub fn set(&self, queue: u32, xsk: RawFd) -> Result<()> {
        let key = queue;
        let value = xsk as u32;
        let mut a = MapElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            ..Default::default()
        };
        sys_bpf(BPF_MAP_UPDATE_ELEM, &mut a).map_err(|e| privilege("adding the AF_XDP socket to the XSKMAP", e))?;
        Ok(())
    }

    /// The map's descriptor, for programs to refer to it ([`asm::ld_map_fd`]).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A loaded XDP program.
pub struct Program {
    fd: OwnedFd,
}

impl Program {
    /// Loads `insns` as an XDP program; a verifier rejection carries the verifier's log.
    pub fn load_xdp(name: &'static str, insns: &[Insn]) -> Result<Program> {
        let license = b"Dual MIT/GPL\0";
        let mut log = vec![0u8; 64 * 1024];
        let mut attempt = |log_level: u32| {
            let mut a = ProgLoadAttr {
                prog_type: BPF_PROG_TYPE_XDP,
                insn_cnt: insns.len() as u32,
                insns: insns.as_ptr() as u64,
                license: license.as_ptr() as u64,
                log_level,
                log_size: if log_level > 0 { log.len() as u32 } else { 0 },
                log_buf: if log_level > 0 { log.as_mut_ptr() as u64 } else { 0 },
                prog_name: name16(name),
                expected_attach_type: BPF_XDP,
                ..Default::default()
            };
            sys_bpf_fd(BPF_PROG_LOAD, &mut a)
        };
        match attempt(0) {
            Ok(fd) => Ok(Program { fd }),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) => {
                Err(privilege("loading an XDP program", e))
            }
            Err(e) => {
                // Load again with the log on, only to explain the failure.
                let _ = attempt(1);
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                Err(Error::Verifier { prog: name, source: e, log: String::from_utf8_lossy(&log[..end]).into_owned() })
            }
        }
    }

    /// Attaches the program to interface `ifindex` in the given mode; the returned link
    /// detaches it when dropped (or when the process dies).
    pub fn attach(&self, ifindex: u32, iface: &str, mode: u32) -> Result<Link> {
        let mut a = LinkCreateAttr {
            prog_fd: self.fd.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: BPF_XDP,
            flags: mode,
            ..Default::default()
        };
        match sys_bpf_fd(BPF_LINK_CREATE, &mut a) {
            Ok(fd) => Ok(Link { fd }),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) => {
                Err(privilege("attaching an XDP program", e))
            }
            Err(source) => Err(Error::XdpAttach { iface: iface.to_string(), source }),
        }
    }
}

/// An XDP attachment; dropping it detaches the program.
pub struct Link {
    #[allow(dead_code)] // held only so that closing it detaches the program
    fd: OwnedFd,
}

/// How an XDP program ended up attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver (native XDP).
    Driver,
    /// On the generic (skb) path, which every interface supports.
    Generic,
}

/// Attaches in the requested mode, or picks one: generic on veth (where it is faster), else
/// native first, falling back to generic.
pub fn attach_best(
    prog: &Program,
    ifindex: u32,
    iface: &str,
    driver: &str,
    want: Option<XdpMode>,
) -> Result<(Link, XdpMode)> {
    let flags = |m| match m {
        XdpMode::Driver => XDP_FLAGS_DRV_MODE,
        XdpMode::Generic => XDP_FLAGS_SKB_MODE,
    };
    if let Some(m) = want {
        return prog.attach(ifindex, iface, flags(m)).map(|l| (l, m));
    }
    if driver == "veth" {
        // Measured: on veth, generic XDP answers faster than native (4.5 vs 4.9 µs p50 for
        // AF_XDP ping-pong), because native veth XDP adds a NAPI hop on every frame.
        return prog.attach(ifindex, iface, flags(XdpMode::Generic)).map(|l| (l, XdpMode::Generic));
    }
    match prog.attach(ifindex, iface, flags(XdpMode::Driver)) {
        Ok(l) => Ok((l, XdpMode::Driver)),
        Err(Error::XdpAttach { .. }) => {
            prog.attach(ifindex, iface, flags(XdpMode::Generic)).map(|l| (l, XdpMode::Generic))
        }
        Err(e) => Err(e),
    }
}

/// lowlat's receive program: frames of lowlat's EtherType go to the AF_XDP socket of their
/// receive queue (through `map`), every other frame to the kernel's stack.
pub fn redirect_program(map_fd: RawFd) -> Vec<Insn> {
    use asm::*;
    let ethertype = i32::from(u16::from_ne_bytes(crate::frame::ETHERTYPE.to_be_bytes()));
    let m = ld_map_fd(R1, map_fd);
    vec![
        ldx(W, R2, R1, 0), // r2 = ctx->data
        ldx(W, R3, R1, 4), // r3 = ctx->data_end
        mov(R4, R2),
        add_imm(R4, 14),
        jgt(R4, R3, 8),     // shorter than an Ethernet header: pass
        ldx(H, R4, R2, 12), // EtherType, as stored (big endian)
        jne_imm(R4, ethertype, 6),
        ldx(W, R2, R1, 16), // key = ctx->rx_queue_index
        m[0],
        m[1],
        mov_imm(R3, XDP_PASS), // no socket for this queue: the low bits are the fallback verdict
        call(HELPER_REDIRECT_MAP),
        exit(),
        mov_imm(R0, XDP_PASS), // pass:
        exit(),
    ]
}

/// The interrupt-level floor: answers PING frames of lowlat's EtherType in the driver's
/// receive path by swapping the MAC addresses and transmitting the frame back (XDP_TX).
pub fn echo_program() -> Vec<Insn> {
    use asm::*;
    let ethertype = i32::from(u16::from_ne_bytes(crate::frame::ETHERTYPE.to_be_bytes()));
    let ping = i32::from(crate::frame::FrameType::Ping.to_u8());
    vec![
        ldx(W, R2, R1, 0),
        ldx(W, R3, R1, 4),
        mov(R4, R2),
        add_imm(R4, crate::frame::HEADER_LEN as i32),
        jgt(R4, R3, 14),
        ldx(H, R4, R2, 12),
        jne_imm(R4, ethertype, 12),
        ldx(B, R4, R2, 14), // kind
        jne_imm(R4, ping, 10),
        ldx(W, R4, R2, 0), // dst[0..4]
        ldx(H, R5, R2, 4), // dst[4..6]
        ldx(W, R6, R2, 6), // src[0..4]
        ldx(H, R7, R2, 10),
        stx(W, R2, 0, R6),
        stx(H, R2, 4, R7),
        stx(W, R2, 6, R4),
        stx(H, R2, 10, R5),
        mov_imm(R0, XDP_TX),
        exit(),
        mov_imm(R0, XDP_PASS), // pass:
        exit(),
    ]
}

/// Fault injection: flips one bit in about one of every `2^shift` frames of lowlat's EtherType
/// (a bit of the lowlat header's session token, so the frame still parses but its CRC32C fails),
/// and passes every frame on.
pub fn corrupt_program(shift: u32) -> Vec<Insn> {
    use asm::*;
    let ethertype = i32::from(u16::from_ne_bytes(crate::frame::ETHERTYPE.to_be_bytes()));
    let mask = ((1u64 << shift.min(31)) - 1) as i32;
    // A byte inside the lowlat header's session token (its fifth): the frame still parses.
    let victim = (crate::frame::HEADER_LEN + lowlat_proto::wire::HeaderView::TOKEN.start + 4) as i16;
    vec![
        mov(R6, R1), // the helper call clobbers r1-r5
        call(HELPER_GET_PRANDOM_U32),
        and_imm(R0, mask),
        jne_imm(R0, 0, 10),
        ldx(W, R2, R6, 0),
        ldx(W, R3, R6, 4),
        mov(R4, R2),
        add_imm(R4, victim as i32 + 1),
        jgt(R4, R3, 5),
        ldx(H, R4, R2, 12),
        jne_imm(R4, ethertype, 3),
        ldx(B, R4, R2, victim),
        xor_imm(R4, 0x40),
        stx(B, R2, victim, R4),
        mov_imm(R0, XDP_PASS), // pass (corrupted or not):
        exit(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_the_kernel_headers() {
        // r1 = r2 -> code 0xbf, dst 1, src 2
        assert_eq!(asm::mov(1, 2), Insn { code: 0xbf, regs: 0x21, off: 0, imm: 0 });
        // r4 = *(u16 *)(r2 + 12)
        assert_eq!(asm::ldx(asm::H, 4, 2, 12), Insn { code: 0x69, regs: 0x24, off: 12, imm: 0 });
        assert_eq!(asm::stx(asm::W, 2, 6, 4).code, 0x63);
        assert_eq!(asm::ld_map_fd(1, 7)[0], Insn { code: 0x18, regs: 0x11, off: 0, imm: 7 });
        assert_eq!(std::mem::size_of::<Insn>(), 8);
    }

    /// Every jump lands inside the program on an instruction, and every path ends in exit.
    fn check_jumps(p: &[Insn]) {
        for (i, ins) in p.iter().enumerate() {
            if matches!(ins.code, 0x2d | 0x55) {
                let t = i as i64 + 1 + ins.off as i64;
                assert!(t > i as i64 && (t as usize) < p.len(), "jump at {i} to {t}");
                assert_eq!(p[t as usize], asm::mov_imm(asm::R0, XDP_PASS), "jump at {i} misses the pass label");
            }
        }
        assert_eq!(p.last(), Some(&asm::exit()));
    }

    #[test]
    fn programs_jump_to_their_labels() {
        check_jumps(&redirect_program(3));
        check_jumps(&echo_program());
        check_jumps(&corrupt_program(2));
    }
}
