//! Network namespaces: moving the calling thread into one.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::cvt;

/// Moves the calling thread (only it: allowed in a multi-threaded process) into the network
/// namespace whose file is at `path` (`/run/netns/NAME` for `ip netns` names). Sockets the
/// thread opens afterwards belong to that namespace for their lifetime.
pub fn enter_netns(path: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let cpath = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "namespace path contains NUL"))?;
    // SAFETY: `cpath` is a NUL-terminated string that outlives the call.
    let fd = cvt(unsafe { libc::open(cpath.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) })?;
    // SAFETY: `fd` was just returned by open(2) and nobody else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: setns on a namespace descriptor we own; CLONE_NEWNET changes only this thread's
    // network namespace and touches no memory of ours.
    cvt(unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) }).map(|_| ())
}
