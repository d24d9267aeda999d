//! Files: what `std::fs` cannot do.

use std::io;
use std::path::Path;

/// Renames `from` to `to`, failing with `AlreadyExists` rather than replacing whatever is at
/// `to` (`renameat2` with `RENAME_NOREPLACE`): a socket file put into place this way never
/// replaces another server's.
pub fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))
    };
    let (from, to) = (c(from)?, c(to)?);
    // SAFETY: both are valid NUL-terminated paths that outlive the call.
    let r =
        unsafe { libc::renameat2(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::RENAME_NOREPLACE) };
    crate::cvt(r).map(|_| ())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_rename_never_replaces() {
        let dir = std::env::temp_dir().join(format!("lowlat-sys-rename-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, "a").unwrap();
        std::fs::write(&b, "b").unwrap();
        let e = super::rename_noreplace(&a, &b).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        std::fs::remove_file(&b).unwrap();
        super::rename_noreplace(&a, &b).unwrap();
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "a");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
