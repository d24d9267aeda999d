//! Memory shared between processes: sealed memfds (a peer can never shrink them from under a
//! mapping) and mappings of them, optionally twice back to back.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

use crate::cvt;

/// The system page size (4096 if the system will not say).
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p <= 0 {
        4096
    } else {
        p as usize
    }
}

/// Creates a memfd of `len` bytes sealed against shrinking, growing and further sealing, so a
/// peer holding the descriptor can never truncate the pages from under our mappings (SIGBUS).
pub fn sealed_memfd(name: &str, len: usize) -> io::Result<OwnedFd> {
    let cname = std::ffi::CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: `cname` is a valid NUL-terminated string.
    let fd = cvt(unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) })?;
    // SAFETY: memfd_create just returned this descriptor and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: plain syscalls on a descriptor we own.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) })?;
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) })?;
    Ok(fd)
}

/// Checks that `fd` is sealed against resizing and has exactly `len` bytes.
pub fn check_sealed(fd: &OwnedFd, len: usize) -> io::Result<bool> {
    // SAFETY: F_GET_SEALS only reads the descriptor's seal set.
    let seals = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) })?;
    let need = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
    // SAFETY: `st` is plain data written by fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid stat buffer for the duration of the call.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(seals & need == need && st.st_size as u64 == len as u64)
}

/// A shared mapping of part of a file, optionally mapped twice back to back so that a ring's
/// data area reads as one contiguous slice across the wrap point.
#[derive(Debug)]
pub struct Mapping {
    base: NonNull<u8>,
    /// Bytes reserved (and unmapped on drop): `len` or `2 * len`.
    reserved: usize,
}

impl Mapping {
    /// Maps `len` bytes of `fd` at `offset` (both page multiples), `twice` back to back if asked.
    pub fn new(fd: &OwnedFd, offset: usize, len: usize, twice: bool) -> io::Result<Mapping> {
        let reserved = if twice { 2 * len } else { len };
        // SAFETY: an anonymous PROT_NONE reservation touches no existing memory.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                reserved,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = Mapping { base: NonNull::new(base.cast()).ok_or(io::ErrorKind::Other)?, reserved };
        let views = if twice { 2 } else { 1 };
        for i in 0..views {
            // SAFETY: the target range lies inside the reservation we own (MAP_FIXED replaces
            // only our own PROT_NONE pages); `fd` is a valid descriptor.
            let p = unsafe {
                libc::mmap(
                    base.cast::<u8>().add(i * len).cast(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_FIXED,
                    fd.as_raw_fd(),
                    offset as libc::off_t,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(map)
    }

    /// The first byte of the mapping (its second view, if mapped twice, starts `len` bytes later).
    /// Valid for as long as `self` lives.
    pub fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: we own exactly this range since `new`; nothing borrows it past our lifetime
        // (the rings holding pointers into it are dropped with their owner first).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.reserved) };
    }
}

/// A mapping made for memory shared with the kernel (a socket's rings) or handed to it (an
/// AF_XDP UMEM): unmapped on drop. What lives in it, and who may write it when, is the owner's
/// to state.
#[derive(Debug)]
pub struct RawMapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; any thread may unmap it.
unsafe impl Send for RawMapping {}

impl RawMapping {
    /// Maps `len` bytes of socket `fd` at `offset` (the page offset a socket documents for one
    /// of its rings), shared with the kernel; `populate` faults the pages in now.
    pub fn socket_ring(fd: std::os::fd::RawFd, offset: i64, len: usize, populate: bool) -> io::Result<RawMapping> {
        let flags = libc::MAP_SHARED | if populate { libc::MAP_POPULATE } else { 0 };
        Self::map(len, flags, fd, offset)
    }

    /// `len` bytes of fresh, private, zeroed memory, faulted in now.
    pub fn anonymous(len: usize) -> io::Result<RawMapping> {
        Self::map(len, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE, -1, 0)
    }

    fn map(len: usize, flags: libc::c_int, fd: std::os::fd::RawFd, offset: i64) -> io::Result<RawMapping> {
        // SAFETY: a new mapping at an address the kernel chooses replaces nothing of ours; the
        // result is checked.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, offset) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(RawMapping { base: NonNull::new(p.cast()).ok_or(io::ErrorKind::Other)?, len })
    }

    /// The first byte; valid for `len` bytes while `self` lives.
    pub fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no byte is mapped (never: mmap refuses a length of zero).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for RawMapping {
    fn drop(&mut self) {
        // SAFETY: we own exactly this range since `map`; its owner drops every pointer into it
        // first.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn double_mapping_aliases_the_same_pages() {
        let fd = sealed_memfd("t", 8192).unwrap();
        assert!(check_sealed(&fd, 8192).unwrap());
        assert!(!check_sealed(&fd, 4096).unwrap());
        let m = Mapping::new(&fd, 4096, 4096, true).unwrap();
        // SAFETY: both views cover 4096 bytes of the same page.
        unsafe {
            *m.as_ptr().add(5) = 42;
            assert_eq!(*m.as_ptr().add(4096 + 5), 42);
        }
        // Sealed: cannot shrink.
        // SAFETY: plain syscall on our descriptor.
        assert!(unsafe { libc::ftruncate(fd.as_raw_fd(), 0) } < 0);
    }
}
