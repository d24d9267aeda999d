//! Every failure of the raw Ethernet transports, each saying what to do about it.

use std::io;

/// Errors of the eth and xdp transports.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The interface is not in this network namespace.
    #[error(
        "network interface {iface:?} does not exist in this network namespace: list them with \
         `ip link` (inside a namespace: `ip netns exec NS ip link`)"
    )]
    NoInterface {
        /// The interface name given.
        iface: String,
    },

    /// The operation needs a capability the process lacks.
    #[error(
        "{op} needs {cap}: run as root, or grant the capability to the binary \
         (`setcap cap_net_raw,cap_net_admin,cap_bpf+ep BINARY`)"
    )]
    Privilege {
        /// What was refused.
        op: &'static str,
        /// The capability it needs, e.g. `"CAP_NET_RAW"`.
        cap: &'static str,
    },

    /// The interface's MTU cannot carry the frames asked for.
    #[error(
        "interface {iface:?} has MTU {mtu}, but {what} needs at least {need}: raise it with \
         `ip link set dev {iface} mtu {need}`"
    )]
    MtuTooSmall {
        /// The interface.
        iface: String,
        /// Its MTU, in bytes.
        mtu: u32,
        /// The MTU needed, in bytes.
        need: u32,
        /// What needs it.
        what: &'static str,
    },

    /// The XDP program could not be attached to the interface.
    #[error(
        "attaching the XDP program to {iface:?} failed ({source}): another XDP program may own \
         the interface (`ip link show dev {iface}`; remove it with `ip link set dev {iface} xdp off`), \
         or the driver does not support XDP"
    )]
    XdpAttach {
        /// The interface.
        iface: String,
        /// The kernel's error.
        source: io::Error,
    },

    /// The kernel refused to load an XDP program.
    #[error("the kernel's verifier rejected lowlat's {prog} XDP program ({source}):\n{log}")]
    Verifier {
        /// Which program.
        prog: &'static str,
        /// The kernel's error.
        source: io::Error,
        /// The verifier's log, saying which instruction it refused and why.
        log: String,
    },

    /// Discovery found no server on the link.
    #[error(
        "no lowlat server answered discovery on {iface:?} after {tries} broadcasts: start the server \
         (`lowlat serve eth://IFACE`) on the other end, or give its MAC (`eth://IFACE/aa:bb:cc:dd:ee:ff`)"
    )]
    NoPeer {
        /// The interface broadcast on.
        iface: String,
        /// Broadcasts sent.
        tries: u32,
    },

    /// A message does not fit one frame's payload on this interface.
    #[error("a {len}-byte payload does not fit the {max}-byte frame payload of {iface:?}")]
    TooLong {
        /// The interface.
        iface: String,
        /// Bytes of the payload.
        len: usize,
        /// Bytes a frame's payload may have on it.
        max: usize,
    },

    /// A receive buffer cannot hold the largest payload.
    #[error("receive buffer of {len} bytes is smaller than the {need}-byte maximum payload")]
    BufferTooSmall {
        /// Bytes of the buffer.
        len: usize,
        /// Bytes it needs.
        need: usize,
    },

    /// An `eth://` or `xdp://` URI that does not name an endpoint.
    #[error("invalid endpoint {uri:?}: {why}")]
    BadUri {
        /// The URI given.
        uri: String,
        /// What is wrong with it.
        why: &'static str,
    },

    /// The kernel did not complete transmitted frames, so no room came free.
    #[error("the transmit ring of {iface:?} stayed full: the kernel is not completing frames")]
    TxRingFull {
        /// The interface.
        iface: String,
    },

    /// No reply came in time.
    #[error("no reply on {iface:?} within {waited:?}: is the peer running, and is its MAC right?")]
    NoReply {
        /// The interface.
        iface: String,
        /// How long the exchange waited.
        waited: std::time::Duration,
    },

    /// The process's socket on this queue was opened with the other checksum setting.
    #[error(
        "this process already holds the AF_XDP socket on {iface:?} with checksums {have}, and a \
         queue takes one socket: bind with checksums {have} as well, or from another process"
    )]
    ChecksumMismatch {
        /// The interface.
        iface: String,
        /// The existing socket's setting: `"on"` or `"off"`.
        have: &'static str,
    },

    /// A system call failed.
    #[error("{op}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The system's error.
        source: io::Error,
    },
}

impl Error {
    /// Wraps an OS error of `op`, turning the errors that have a clear remedy into their own
    /// variants: EPERM/EACCES into [`Error::Privilege`] (needing `cap`), ENODEV into
    /// [`Error::NoInterface`].
    pub(crate) fn os(op: &'static str, cap: &'static str, iface: &str, source: io::Error) -> Self {
        match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => Error::Privilege { op, cap },
            Some(libc::ENODEV) | Some(libc::ENXIO) => Error::NoInterface { iface: iface.to_string() },
            _ => Error::Io { op, source },
        }
    }

    pub(crate) fn io(op: &'static str, source: io::Error) -> Self {
        Error::Io { op, source }
    }
}

/// A result whose error is this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_errors_map_to_remedies() {
        let e =
            Error::os("opening an AF_PACKET socket", "CAP_NET_RAW", "veth0", io::Error::from_raw_os_error(libc::EPERM));
        assert!(matches!(e, Error::Privilege { .. }));
        assert!(e.to_string().contains("CAP_NET_RAW"), "{e}");
        let e = Error::os("binding", "CAP_NET_RAW", "nope0", io::Error::from_raw_os_error(libc::ENODEV));
        assert!(e.to_string().contains("\"nope0\"") && e.to_string().contains("ip link"), "{e}");
        let e = Error::os("binding", "CAP_NET_RAW", "x", io::Error::from_raw_os_error(libc::EINVAL));
        assert!(matches!(e, Error::Io { .. }));
    }
}
