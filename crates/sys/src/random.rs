//! Randomness from the kernel: every nonce, session token seed, cookie key and first xid in
//! lowlat comes from here.

use std::io::{self, Read};

/// Fills `buf` from `getrandom(2)`, or from `/dev/urandom` on a kernel without it; an error only
/// when neither is available (never a guessable substitute).
pub fn fill(buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: writes at most `rest.len()` bytes into the live slice `rest`.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n > 0 {
            done += n as usize;
            continue;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ENOSYS) => return std::fs::File::open("/dev/urandom")?.read_exact(rest),
            _ => return Err(e),
        }
    }
    Ok(())
}

/// 64 random bits (see [`fill`]).
pub fn u64() -> io::Result<u64> {
    let mut b = [0u8; 8];
    fill(&mut b)?;
    Ok(u64::from_ne_bytes(b))
}

#[cfg(test)]
mod tests {
    #[test]
    fn draws_differ_and_fill_every_byte() {
        assert_ne!(super::u64().unwrap(), super::u64().unwrap());
        let mut big = [0u8; 4096];
        super::fill(&mut big).unwrap();
        // 4096 random bytes with no byte value missing from the last 64 would be a fluke.
        assert!(big[4032..].iter().any(|&b| b != 0));
    }
}
