//! Valgrind's client requests for counting instructions under callgrind (`valgrind
//! --tool=callgrind --collect-atstart=no`): a thread's instructions are collected between
//! [`mark`]`(true)` and [`mark`]`(false)`, so that a count holds a call's path and leaves out
//! its waiting, whatever the host's clock does. lowlat's call path calls [`mark`] only in its
//! counting build (the `callgrind` feature of the `lowlat` crate); the path users run has no
//! marks.
//!
//! A request is a sequence of rotations of `rdi` by 128 bits in all (no effect) followed by
//! `xchg rbx, rbx`, which valgrind's translator recognises and a CPU runs as nothing: outside
//! valgrind every request answers 0 and does nothing. x86-64 only; elsewhere likewise nothing.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// The path (as callgrind names functions) of this module, whose functions' own instructions
/// a count leaves out.
pub const MARKS_MODULE: &str = "lowlat_sys::callgrind::";

/// Whether a server's count ends when its reply is out ([`replied`]).
static REPLY_ENDS_COUNT: AtomicBool = AtomicBool::new(false);

const RUNNING_ON_VALGRIND: u64 = 0x1001;
/// `VG_USERREQ_TOOL_BASE('C', 'T')`: callgrind's requests follow in the order of callgrind.h.
const CALLGRIND_BASE: u64 = (b'C' as u64) << 24 | (b'T' as u64) << 16;
const CALLGRIND_ZERO_STATS: u64 = CALLGRIND_BASE + 1;
const CALLGRIND_TOGGLE_COLLECT: u64 = CALLGRIND_BASE + 2;

thread_local! {
    /// Whether this thread collects: callgrind's request toggles, a mark sets.
    static COLLECTING: Cell<bool> = const { Cell::new(false) };
}

/// Collects this thread's instructions from here on (`true`) or stops (`false`); a mark that
/// does not change the state does nothing, so a wait loop may mark `false` before every look and
/// a transport `true` when a look finds something. Out of line, so that its own instructions
/// carry its name (in [`MARKS_MODULE`]) and a count can leave them out.
#[inline(never)]
pub fn mark(on: bool) {
    if COLLECTING.with(|c| c.replace(on)) != on {
        request(CALLGRIND_TOGGLE_COLLECT);
    }
}

/// Makes a server's count end when its reply is out (`true`), or run on to its next look
/// (`false`, the default): the counting program's choice, made before it serves.
pub fn set_reply_ends_count(on: bool) {
    REPLY_ENDS_COUNT.store(on, Ordering::Relaxed);
}

/// A server's reply is out (published in the ring, or sent): ends this thread's count if the
/// counting program asked for that ([`set_reply_ends_count`]).
#[inline(never)]
pub fn replied() {
    if REPLY_ENDS_COUNT.load(Ordering::Relaxed) {
        mark(false);
    }
}

/// Zeroes the calling thread's counts so far (after a warm-up: channels opened, buffers grown).
pub fn zero_stats() {
    request(CALLGRIND_ZERO_STATS);
}

/// Whether this program runs under valgrind.
pub fn running_on_valgrind() -> bool {
    request(RUNNING_ON_VALGRIND) != 0
}

/// Valgrind's client request `code` with no arguments; 0 when not under valgrind.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn request(code: u64) -> u64 {
    let args: [u64; 6] = [code, 0, 0, 0, 0, 0];
    let mut result: u64 = 0;
    // SAFETY: the rotations leave `rdi` as it was (3 + 13 + 61 + 51 = 128 bits) and
    // `xchg rbx, rbx` changes nothing, so natively the block changes only the flags; under
    // valgrind it is the client request, which reads the six words at `rax` (`args`, alive on
    // this frame for the whole block) and writes its answer in `rdx`.
    unsafe {
        std::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            inout("rdx") result,
            in("rax") args.as_ptr(),
            inout("rdi") 0u64 => _,
        );
    }
    result
}

#[cfg(not(target_arch = "x86_64"))]
fn request(_code: u64) -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_do_nothing_outside_valgrind_and_marks_keep_their_state() {
        // (Under valgrind, the counting test runs the same requests: crates/lab/tests.)
        assert!(!running_on_valgrind());
        mark(true);
        assert!(COLLECTING.with(|c| c.get()));
        mark(true);
        zero_stats();
        mark(false);
        assert!(!COLLECTING.with(|c| c.get()));
    }
}
