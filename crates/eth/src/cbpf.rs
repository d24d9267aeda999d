//! Classic BPF socket filters: per-slot demultiplexing in the kernel.
//!
//! The runtime opens one channel per call slot; each slot's AF_PACKET socket carries a filter
//! so that the kernel hands it only replies for its slot (and, optionally, only frames from the
//! peer), instead of every socket waking for every frame.

use lowlat_proto::wire::HeaderView;

use crate::frame::{FrameType, HEADER_LEN};
use crate::Mac;

/// Which frames a socket accepts (beyond being of lowlat's EtherType, which binding ensures).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only DATA frames whose lowlat header slot (u16 LE, [`HeaderView::SLOT`]) equals
    /// this; frames of other kinds (discovery, ping) still pass.
    pub slot: Option<u16>,
    /// Only frames whose source MAC is this.
    pub peer: Option<Mac>,
}

impl Filter {
    /// Accepts every frame of lowlat's EtherType: no filter need be attached.
    pub fn is_empty(&self) -> bool {
        self.slot.is_none() && self.peer.is_none()
    }
}

/// Offset of the lowlat header's slot field in the frame.
pub const SLOT_OFFSET: u32 = (HEADER_LEN + HeaderView::SLOT.start) as u32;

use lowlat_sys::cbpf::{ins, return_u16_le_over, JEQ_K, LD_B_ABS, LD_H_ABS, LD_W_ABS, LINK_LAYER, RET_A, RET_K};
#[cfg(test)]
use lowlat_sys::cbpf::{DIV_K, LSH_K, OR_X, TAX};

#[derive(Clone, Copy)]
enum To {
    Next,
    Accept,
    Drop,
}

/// One instruction: (code, k, jump if true, jump if false).
type Ins = (u16, u32, To, To);

/// Compiles `f` into classic BPF instructions (for SOCK_RAW: offsets from the Ethernet header).
/// A load beyond the frame's end makes classic BPF return 0, so short frames are dropped.
pub fn compile(f: &Filter) -> Vec<libc::sock_filter> {
    let mut p: Vec<Ins> = Vec::new();
    if let Some(m) = f.peer {
        let hi = u32::from_be_bytes([m.0[0], m.0[1], m.0[2], m.0[3]]);
        let lo = u16::from_be_bytes([m.0[4], m.0[5]]) as u32;
        p.push((LD_W_ABS, 6, To::Next, To::Next));
        p.push((JEQ_K, hi, To::Next, To::Drop));
        p.push((LD_H_ABS, 10, To::Next, To::Next));
        p.push((JEQ_K, lo, To::Next, To::Drop));
    }
    if let Some(slot) = f.slot {
        p.push((LD_B_ABS, 14, To::Next, To::Next));
        p.push((JEQ_K, FrameType::Data.to_u8() as u32, To::Next, To::Accept));
        // Classic BPF loads are big endian; the slot field is little endian.
        p.push((LD_H_ABS, SLOT_OFFSET, To::Next, To::Next));
        p.push((JEQ_K, slot.swap_bytes() as u32, To::Next, To::Drop));
    }
    let accept = p.len();
    let drop = p.len() + 1;
    let mut out: Vec<libc::sock_filter> = p
        .iter()
        .enumerate()
        .map(|(i, &(code, k, jt, jf))| {
            let off = |t: To| -> u8 {
                match t {
                    To::Next => 0,
                    To::Accept => (accept - i - 1) as u8,
                    To::Drop => (drop - i - 1) as u8,
                }
            };
            libc::sock_filter { code, jt: off(jt), jf: off(jf), k }
        })
        .collect();
    out.push(libc::sock_filter { code: RET_K, jt: 0, jf: 0, k: u32::MAX });
    out.push(libc::sock_filter { code: RET_K, jt: 0, jf: 0, k: 0 });
    out
}

/// The program that spreads the frames of a `PACKET_FANOUT_CBPF` group over the sockets of an
/// endpoint's `threads` serving threads (the kernel takes what it returns modulo the sockets,
/// numbered in the order they joined): a DATA frame to the thread holding the session its
/// token names (the session index, bytes 4 and 5 of the token, little-endian, divided by each
/// thread's span: `lowlat_proto::Shard::owner`); a bind, which has no session yet, by its nonce
/// (a retransmitted bind reaches the same thread, which answers it as the first); discovery
/// and pings to the first. Loads are from the Ethernet header (a fanout program sees the
/// frame from its payload), and one beyond the frame's end returns 0: the first thread.
pub fn steering(threads: u16) -> Vec<libc::sock_filter> {
    let at = |offset: usize| LINK_LAYER.wrapping_add(offset as u32);
    let lowlat = HEADER_LEN;
    let index_lo = lowlat + HeaderView::TOKEN.start + 4;
    let nonce = lowlat + lowlat_proto::HEADER_LEN + lowlat_proto::wire::BindRequest::NONCE.start;
    let span = lowlat_proto::Shard::new(0, threads).span() as u32;
    [
        &[
            ins(LD_B_ABS, 0, 0, at(crate::frame::ETH_HEADER_LEN)),
            // Not DATA (discovery, ping): to the last instruction, the first thread.
            ins(JEQ_K, 0, 11, u32::from(FrameType::Data.to_u8())),
            ins(LD_B_ABS, 0, 0, at(lowlat + HeaderView::KIND)),
            // A bind: by its nonce.
            ins(JEQ_K, 7, 0, u32::from(lowlat_proto::Kind::Bind.to_u8())),
        ][..],
        &return_u16_le_over(at(index_lo), span),
        &[ins(LD_W_ABS, 0, 0, at(nonce)), ins(RET_A, 0, 0, 0), ins(RET_K, 0, 0, 0)],
    ]
    .concat()
}

/// Runs a program over a frame, as the kernel would (only the instructions `compile` and
/// `steering` emit; loads from the link layer read the frame from its start); used to test
/// the programs without a socket.
#[cfg(test)]
pub fn interpret(prog: &[libc::sock_filter], pkt: &[u8]) -> u32 {
    let (mut a, mut x): (u32, u32) = (0, 0);
    let mut pc = 0usize;
    loop {
        let ins = prog[pc];
        pc += 1;
        let k = ins.k.wrapping_sub(if ins.k >= LINK_LAYER { LINK_LAYER } else { 0 }) as usize;
        match ins.code {
            LD_W_ABS | LD_H_ABS | LD_B_ABS => {
                let n = match ins.code {
                    LD_W_ABS => 4,
                    LD_H_ABS => 2,
                    _ => 1,
                };
                if k + n > pkt.len() {
                    return 0;
                }
                a = pkt[k..k + n].iter().fold(0u32, |acc, &b| (acc << 8) | b as u32);
            }
            JEQ_K => pc += if a == ins.k { ins.jt } else { ins.jf } as usize,
            LSH_K => a <<= ins.k,
            TAX => x = a,
            OR_X => a |= x,
            DIV_K => a /= ins.k,
            RET_A => return a,
            RET_K => return ins.k,
            c => panic!("unexpected opcode {c:#x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::header;

    fn frame(src: Mac, kind: FrameType, slot: u16) -> Vec<u8> {
        let mut head = lowlat_proto::wire::Header::new(lowlat_proto::wire::Kind::Result);
        head.slot = slot;
        let lowlat = head.to_bytes();
        let mut f = header(Mac([9; 6]), src, kind, false, 32).to_vec();
        f.extend_from_slice(&lowlat);
        f
    }

    /// Each DATA frame goes to the thread whose span holds its session index; binds by their
    /// nonce; the rest (and frames too short to tell) to the first.
    #[test]
    fn steering_sends_each_session_to_its_thread() {
        let threads = 4u16;
        let prog = steering(threads);
        let data = |kind: lowlat_proto::wire::Kind, token: u64, body: &[u8]| {
            let head = lowlat_proto::wire::Header { token, ..lowlat_proto::wire::Header::new(kind) };
            let mut f = header(Mac([9; 6]), Mac([2; 6]), FrameType::Data, false, 32).to_vec();
            f.extend_from_slice(&head.to_bytes());
            f.extend_from_slice(body);
            f
        };
        for thread in 0..threads {
            let shard = lowlat_proto::Shard::new(thread, threads);
            for index in [shard.base(), shard.base() + shard.span() - 1] {
                let token = lowlat_proto::wire::token::new(7, index as u16, 0xdead_beef);
                assert_eq!(lowlat_proto::Shard::owner(token, threads), thread);
                let f = data(lowlat_proto::wire::Kind::Call, token, &[]);
                assert_eq!(interpret(&prog, &f), u32::from(thread), "index {index}");
            }
        }
        let mut bind = [0u8; 32];
        bind[24..32].copy_from_slice(&0x0102_0304_0506_0708u64.to_le_bytes());
        let f = data(lowlat_proto::wire::Kind::Bind, 0, &bind);
        assert_eq!(interpret(&prog, &f), u32::from_be_bytes([8, 7, 6, 5]), "a bind by its nonce");
        let ping = header(Mac([9; 6]), Mac([2; 6]), FrameType::Ping, false, 32).to_vec();
        assert_eq!(interpret(&prog, &ping), 0);
        assert_eq!(interpret(&prog, &f[..20]), 0, "too short");
    }

    #[test]
    fn slot_and_peer() {
        let peer = Mac([2, 0, 0, 0, 0, 0x42]);
        let other = Mac([2, 0, 0, 0, 0, 0x43]);
        let none = compile(&Filter::default());
        assert_eq!(interpret(&none, &frame(other, FrameType::Data, 1)), u32::MAX);

        let f = compile(&Filter { slot: Some(0x0102), peer: Some(peer) });
        assert_eq!(interpret(&f, &frame(peer, FrameType::Data, 0x0102)), u32::MAX);
        assert_eq!(interpret(&f, &frame(peer, FrameType::Data, 0x0201)), 0);
        assert_eq!(interpret(&f, &frame(other, FrameType::Data, 0x0102)), 0);
        assert_eq!(interpret(&f, &frame(peer, FrameType::DiscoverReply, 7)), u32::MAX);
        assert_eq!(interpret(&f, &frame(peer, FrameType::Data, 0x0102)[..20]), 0);

        let s = compile(&Filter { slot: Some(5), peer: None });
        assert_eq!(interpret(&s, &frame(other, FrameType::Data, 5)), u32::MAX);
        assert_eq!(interpret(&s, &frame(other, FrameType::Data, 6)), 0);
        let p = compile(&Filter { slot: None, peer: Some(peer) });
        assert_eq!(interpret(&p, &frame(peer, FrameType::Ping, 0)), u32::MAX);
        assert_eq!(interpret(&p, &frame(other, FrameType::Ping, 0)), 0);
    }
}
