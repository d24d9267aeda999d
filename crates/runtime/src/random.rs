//! Seeds for the engines' randomness (session tokens, first xids), from the kernel.

/// 64 random bits from `getrandom`; without it, time and process id (guessable, but never the
/// same twice in a row).
pub(crate) fn seed() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: writes at most 8 bytes into a live 8-byte buffer.
    let n = unsafe { libc::getrandom(b.as_mut_ptr() as *mut libc::c_void, 8, 0) };
    if n == 8 {
        return u64::from_ne_bytes(b);
    }
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    t ^ (std::process::id() as u64) << 32
}

/// 32 random bytes from `getrandom` (a server's secret); without it, bytes stretched from
/// [`seed`]s.
pub(crate) fn secret() -> [u8; 32] {
    let mut b = [0u8; 32];
    // SAFETY: writes at most 32 bytes into a live 32-byte buffer.
    let n = unsafe { libc::getrandom(b.as_mut_ptr() as *mut libc::c_void, 32, 0) };
    if n != 32 {
        for chunk in b.chunks_mut(8) {
            chunk.copy_from_slice(&seed().to_ne_bytes());
        }
    }
    b
}

#[cfg(test)]
mod tests {
    #[test]
    fn seeds_differ() {
        assert_ne!(super::seed(), super::seed());
        assert_ne!(super::secret(), super::secret());
    }
}
