//! The socket file a shared-memory listener answers at: created atomically with its mode, a
//! stale one of a dead server replaced, and removed at the end only if it is still ours. Shared
//! by [`ShmServer`](crate::ShmServer) and by any other listener of the same kind of path (the
//! laboratory's floor echoer).

use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use crate::error::{io_err, ShmError};
use lowlat_sys as sys;

/// Removes the socket file at `path` if it is still the one [`listen`] created (`file_id`), not
/// one a later server put there.
pub fn remove_if_ours(path: &Path, file_id: (u64, u64)) {
    if let Ok(md) = std::fs::symlink_metadata(path) {
        if (md.dev(), md.ino()) == file_id {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Creates the listening socket at `path` with `mode`, atomically: bound in a private directory,
/// given its mode there, then renamed into place without replacing anything that appeared
/// meanwhile. A stale socket (connect refused: its server is gone) is removed first. Returns the
/// listener and the (device, inode) that [`remove_if_ours`] checks.
pub fn listen(path: &Path, mode: u32) -> Result<(UnixListener, (u64, u64)), ShmError> {
    let in_use = |why| ShmError::PathInUse { path: path.to_path_buf(), why };
    match std::fs::symlink_metadata(path) {
        Ok(md) if md.file_type().is_socket() => match UnixStream::connect(path) {
            Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
                std::fs::remove_file(path).map_err(io_err("remove stale socket"))?;
            }
            Ok(_) => return Err(in_use("a server is listening there")),
            Err(_) => return Err(in_use("a socket that is not provably stale")),
        },
        Ok(_) => return Err(in_use("not a socket")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(ShmError::Io { op: "listen", source: e }),
    }
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = parent.join(format!(".llshm-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
    std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(io_err("listen (temp dir)"))?;
    let result = (|| {
        let tmp = dir.join("s");
        let listener = UnixListener::bind(&tmp).map_err(io_err("bind"))?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).map_err(io_err("chmod socket"))?;
        // Into place without replacing whatever may have appeared at `path` since the check above.
        if let Err(e) = sys::fs::rename_noreplace(&tmp, path) {
            if e.kind() == io::ErrorKind::AlreadyExists {
                return Err(in_use("something appeared there while connection"));
            }
            return Err(ShmError::Io { op: "rename socket into place", source: e });
        }
        let md = std::fs::symlink_metadata(path).map_err(io_err("listen"))?;
        Ok((listener, (md.dev(), md.ino())))
    })();
    let _ = std::fs::remove_file(dir.join("s"));
    let _ = std::fs::remove_dir(&dir);
    result
}
