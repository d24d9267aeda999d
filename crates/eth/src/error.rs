//! Every failure of the raw Ethernet transports, each saying what to do about it.

use std::io;

/// Errors of the eth and xdp transports and of the test hosts.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "network interface {iface:?} does not exist in this network namespace: list them with \
         `ip link` (inside a namespace: `ip netns exec NS ip link`)"
    )]
    NoInterface { iface: String },

    #[error(
        "{op} needs {cap}: run as root, or grant the capability to the binary \
         (`setcap cap_net_raw,cap_net_admin,cap_bpf+ep BINARY`)"
    )]
    Privilege { op: &'static str, cap: &'static str },

    #[error(
        "interface {iface:?} has MTU {mtu}, but {what} needs at least {need}: raise it with \
         `ip link set dev {iface} mtu {need}`"
    )]
    MtuTooSmall { iface: String, mtu: u32, need: u32, what: &'static str },

    #[error(
        "attaching the XDP program to {iface:?} failed ({source}): another XDP program may own \
         the interface (`ip link show dev {iface}`; remove it with `ip link set dev {iface} xdp off`), \
         or the driver does not support XDP"
    )]
    XdpAttach { iface: String, source: io::Error },

    #[error("the kernel's verifier rejected lowlat's {prog} XDP program ({source}):\n{log}")]
    Verifier { prog: &'static str, source: io::Error, log: String },

    #[error(
        "no lowlat server answered discovery on {iface:?} after {tries} broadcasts: start the server \
         (`lowlat serve eth://IFACE`) on the other end, or give its MAC (`eth://IFACE/aa:bb:cc:dd:ee:ff`)"
    )]
    NoPeer { iface: String, tries: u32 },

    #[error("a {len}-byte payload does not fit the {max}-byte frame payload of {iface:?}")]
    TooLong { iface: String, len: usize, max: usize },

    #[error("receive buffer of {len} bytes is smaller than the {need}-byte maximum payload")]
    BufferTooSmall { len: usize, need: usize },

    #[error("invalid endpoint {uri:?}: {why}")]
    BadUri { uri: String, why: &'static str },

    #[error("the transmit ring of {iface:?} stayed full: the kernel is not completing frames")]
    TxRingFull { iface: String },

    #[error("`{cmd}` failed ({status}): {stderr}")]
    Command { cmd: String, status: String, stderr: String },

    #[error("no reply on {iface:?} within {waited:?}: is the peer running, and is its MAC right?")]
    NoReply { iface: String, waited: std::time::Duration },

    #[error(
        "this process already holds the AF_XDP socket on {iface:?} with checksums {have}, and a \
         queue takes one socket: bind with checksums {have} as well, or from another process"
    )]
    ChecksumMismatch { iface: String, have: &'static str },

    #[error("{op}: {source}")]
    Io { op: &'static str, source: io::Error },
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
