//! A barrier that every running thread of the process executes (membarrier(2)), so that a rare
//! path can order itself against a frequent one that uses no fence at all: the frequent side
//! gives its slot back with a plain store and then reads a counter, the rare side bumps the
//! counter, calls [`heavy_barrier`] and looks again (the asymmetric fence of liburcu and folly).

use std::io;
use std::sync::OnceLock;

const CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

fn membarrier(cmd: libc::c_int) -> io::Result<()> {
    // SAFETY: membarrier takes two integers and touches no memory of ours.
    let r = unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_uint, 0 as libc::c_int) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Makes every thread of this process that is running now execute a full memory barrier before
/// this returns (threads not running pass one when they are next scheduled). `false` when the
/// kernel offers no such barrier (before Linux 4.14, or forbidden by a seccomp filter): the
/// caller must then not rely on it.
pub fn heavy_barrier() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| membarrier(CMD_REGISTER_PRIVATE_EXPEDITED).is_ok());
    ok && membarrier(CMD_PRIVATE_EXPEDITED).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_offers_the_barrier() {
        // Every kernel lowlat supports (5.x and later) has it; a failure here means the waiting
        // for call slots falls back to its bounded re-check.
        assert!(heavy_barrier());
        assert!(heavy_barrier());
    }
}
