//! The bpf(2) system call, for loading XDP programs, creating maps and attaching links.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// bpf(2) command `cmd` with attribute block `attr`: the kernel's non-negative result.
///
/// # Safety
///
/// `attr` must be the `bpf_attr` variant `cmd` reads, zero beyond its used fields, and every
/// address inside it must lead to a live buffer of the length given beside it (writable where
/// the kernel writes, as a verifier log), for the duration of the call. Only the caller, who
/// built `attr`, can know that.
pub unsafe fn bpf<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is live and of the size passed; the caller vouches for what it points at.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r)
}

/// [`bpf`] for a command whose result is a new descriptor (a map, a program, a link).
///
/// # Safety
///
/// As for [`bpf`], and `cmd` must be a command that returns a new descriptor.
pub unsafe fn bpf_fd<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<OwnedFd> {
    // SAFETY: the caller's promise, passed on.
    let r = unsafe { bpf(cmd, attr) }?;
    // SAFETY: `cmd` returns a new descriptor (the caller's promise) that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}
