//! Socket options of any type.

use std::io;
use std::os::fd::RawFd;

/// Sets option `name` at `level` to `value` (passed by address, as the kernel expects).
pub fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points at a live T of the size passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(fd, level, name, (value as *const T).cast(), std::mem::size_of::<T>() as libc::socklen_t)
    };
    crate::cvt(r).map(|_| ())
}

/// Reads option `name` at `level` into a `T`; fails unless the kernel wrote exactly a `T`.
pub fn getsockopt<T: Copy + Default>(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<T> {
    let mut value = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live and sized as passed; the kernel writes at most `len` bytes.
    let r = unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut T).cast(), &mut len) };
    crate::cvt(r)?;
    if len as usize != std::mem::size_of::<T>() {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("socket option of {len} bytes")));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    #[test]
    fn an_option_set_reads_back() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        super::setsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, &65536i32).unwrap();
        // The kernel doubles the size asked for (its bookkeeping).
        let got: i32 = super::getsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF).unwrap();
        assert_eq!(got, 2 * 65536);
        assert!(super::setsockopt(-1, libc::SOL_SOCKET, libc::SO_RCVBUF, &1i32).is_err());
    }
}
