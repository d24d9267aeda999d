//! Classic BPF, the instruction set of socket filters, `SO_ATTACH_REUSEPORT_CBPF` and
//! `PACKET_FANOUT_CBPF`: the opcodes lowlat's programs use (`linux/filter.h`: class | size |
//! mode, class | op | source) and one instruction.

/// `A = packet[k..k+4]` (big-endian).
pub const LD_W_ABS: u16 = 0x20;
/// `A = packet[k..k+2]` (big-endian).
pub const LD_H_ABS: u16 = 0x28;
/// `A = packet[k]`.
pub const LD_B_ABS: u16 = 0x30;
/// `pc += A == k ? jt : jf`.
pub const JEQ_K: u16 = 0x15;
/// `A <<= k`.
pub const LSH_K: u16 = 0x64;
/// `X = A`.
pub const TAX: u16 = 0x07;
/// `A |= X`.
pub const OR_X: u16 = 0x4c;
/// `A /= k`.
pub const DIV_K: u16 = 0x34;
/// Returns `A`.
pub const RET_A: u16 = 0x16;
/// Returns `k`.
pub const RET_K: u16 = 0x06;

/// Added to a load's offset, reads from the link-layer (Ethernet) header, wherever the program
/// runs: a fanout program sees the packet from its network header (`SKF_LL_OFF`).
pub const LINK_LAYER: u32 = (-0x20_0000i32) as u32;

/// One instruction: `code`, then the jumps if true and if false, then the constant.
pub const fn ins(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Returns the little-endian `u16` loaded from offset `at` divided by `divisor` (a steering
/// program's answer: a session index over each thread's span of them).
pub const fn return_u16_le_over(at: u32, divisor: u32) -> [libc::sock_filter; 7] {
    [
        ins(LD_B_ABS, 0, 0, at.wrapping_add(1)),
        ins(LSH_K, 0, 0, 8),
        ins(TAX, 0, 0, 0),
        ins(LD_B_ABS, 0, 0, at),
        ins(OR_X, 0, 0, 0),
        ins(DIV_K, 0, 0, divisor),
        ins(RET_A, 0, 0, 0),
    ]
}
