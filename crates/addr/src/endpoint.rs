//! Endpoint URIs, parsed in one place for every scheme: `udp://HOST:PORT`, `tcp://HOST:PORT`,
//! `shm://PATH`, `eth://IFACE[/PEER-MAC]`, `xdp://IFACE[/PEER-MAC]`, `onc+udp://HOST[:PORT]`,
//! `onc+tcp://HOST[:PORT]`; and Ethernet (MAC) addresses.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// A URI that does not name an endpoint, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid endpoint {uri:?}: {reason}")]
pub struct UriError {
    /// The URI as given.
    pub uri: String,
    /// What is wrong with it, with an example of what was expected.
    pub reason: String,
}

/// A parsed endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `udp://HOST:PORT`: lowlat's protocol over UDP datagrams.
    Udp {
        /// `HOST:PORT` as written (the port checked to be a number; the host resolved later).
        host_port: String,
    },
    /// `tcp://HOST:PORT`: lowlat's protocol over a TCP stream.
    Tcp {
        /// `HOST:PORT` as written (the port checked to be a number; the host resolved later).
        host_port: String,
    },
    /// `shm://PATH`: shared-memory rings, handed over on the Unix socket at `PATH`.
    Shm {
        /// The Unix socket's path (never empty).
        path: PathBuf,
    },
    /// `eth://IFACE[/PEER-MAC]`: raw Ethernet frames (AF_PACKET) of lowlat's EtherType.
    Eth {
        /// The interface name (1 to 15 bytes, the kernel's limit).
        iface: String,
        /// The peer's address; without it a client discovers the server by broadcast.
        peer: Option<Mac>,
    },
    /// `xdp://IFACE[/PEER-MAC]`: raw Ethernet frames through an AF_XDP socket.
    Xdp {
        /// The interface name (1 to 15 bytes, the kernel's limit).
        iface: String,
        /// The peer's address; without it a client discovers the server by broadcast.
        peer: Option<Mac>,
    },
    /// `onc+udp://HOST[:PORT]`: ONC RPC (RFC 5531) over UDP.
    OncUdp {
        /// The host name or address (an IPv6 address keeps its brackets).
        host: String,
        /// Without it a client asks the host's rpcbind, and a server takes any free port.
        port: Option<u16>,
    },
    /// `onc+tcp://HOST[:PORT]`: ONC RPC (RFC 5531) over TCP, with record marking.
    OncTcp {
        /// The host name or address (an IPv6 address keeps its brackets).
        host: String,
        /// Without it a client asks the host's rpcbind, and a server takes any free port.
        port: Option<u16>,
    },
}

impl Endpoint {
    /// The scheme, as written in URIs.
    pub fn scheme(&self) -> &'static str {
        match self {
            Endpoint::Udp { .. } => "udp",
            Endpoint::Tcp { .. } => "tcp",
            Endpoint::Shm { .. } => "shm",
            Endpoint::Eth { .. } => "eth",
            Endpoint::Xdp { .. } => "xdp",
            Endpoint::OncUdp { .. } => "onc+udp",
            Endpoint::OncTcp { .. } => "onc+tcp",
        }
    }

    /// The interface and the peer (if given) of an `eth://` or `xdp://` endpoint.
    pub fn ethernet(&self) -> Option<(&str, Option<Mac>)> {
        match self {
            Endpoint::Eth { iface, peer } | Endpoint::Xdp { iface, peer } => Some((iface, *peer)),
            _ => None,
        }
    }
}

/// A 48-bit Ethernet address, written `02:00:00:00:00:0a` (or with `-` between the bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    /// `ff:ff:ff:ff:ff:ff`: every station on the link (used to discover a server).
    pub const BROADCAST: Mac = Mac([0xff; 6]);
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }
}

/// A string that is not a MAC address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a MAC address like 02:00:00:00:00:01")]
pub struct BadMac(pub String);

impl FromStr for Mac {
    type Err = BadMac;
    fn from_str(s: &str) -> Result<Self, BadMac> {
        let bad = || BadMac(s.to_string());
        // One separator throughout: `:` or `-`.
        let sep = if s.contains('-') { '-' } else { ':' };
        let mut out = [0u8; 6];
        let mut parts = s.split(sep);
        for b in out.iter_mut() {
            let p = parts.next().ok_or_else(bad)?;
            if p.len() != 2 {
                return Err(bad());
            }
            *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(Mac(out))
    }
}

fn invalid(uri: &str, reason: impl Into<String>) -> UriError {
    UriError { uri: uri.to_string(), reason: reason.into() }
}

fn host_port(uri: &str, rest: &str) -> Result<String, UriError> {
    let Some((host, port)) = rest.rsplit_once(':') else {
        return Err(invalid(uri, "expected HOST:PORT, e.g. udp://127.0.0.1:7000"));
    };
    if host.is_empty() {
        return Err(invalid(uri, "the host is empty"));
    }
    port.parse::<u16>().map_err(|_| invalid(uri, format!("port {port:?} is not a number from 0 to 65535")))?;
    Ok(rest.to_string())
}

fn iface_peer(uri: &str, rest: &str) -> Result<(String, Option<Mac>), UriError> {
    let (iface, peer) = match rest.split_once('/') {
        Some((i, p)) => (i, Some(p)),
        None => (rest, None),
    };
    if iface.is_empty() || iface.len() > 15 {
        return Err(invalid(uri, "expected an interface name of 1 to 15 characters, e.g. eth://veth0"));
    }
    let peer = match peer {
        None | Some("") => None,
        Some(p) => Some(p.parse::<Mac>().map_err(|e| invalid(uri, e.to_string()))?),
    };
    Ok((iface.to_string(), peer))
}

fn onc(uri: &str, rest: &str) -> Result<(String, Option<u16>), UriError> {
    if rest.is_empty() {
        return Err(invalid(uri, "the host is empty"));
    }
    // [v6]:port, host:port, or host alone.
    if let Some(v6) = rest.strip_prefix('[') {
        let (h, tail) = v6.split_once(']').ok_or_else(|| invalid(uri, "unclosed '[' in IPv6 address"))?;
        let port = match tail.strip_prefix(':') {
            Some(p) => Some(p.parse().map_err(|_| invalid(uri, format!("port {p:?} is not a number")))?),
            None if tail.is_empty() => None,
            None => return Err(invalid(uri, "unexpected text after the address")),
        };
        return Ok((format!("[{h}]"), port));
    }
    match rest.rsplit_once(':') {
        Some((h, p)) => {
            Ok((h.to_string(), Some(p.parse().map_err(|_| invalid(uri, format!("port {p:?} is not a number")))?)))
        }
        None => Ok((rest.to_string(), None)),
    }
}

impl FromStr for Endpoint {
    type Err = UriError;
    fn from_str(uri: &str) -> Result<Endpoint, UriError> {
        let Some((scheme, rest)) = uri.split_once("://") else {
            return Err(invalid(uri, "expected SCHEME://..., one of udp, tcp, shm, eth, xdp, onc+udp, onc+tcp"));
        };
        Ok(match scheme {
            "udp" => Endpoint::Udp { host_port: host_port(uri, rest)? },
            "tcp" => Endpoint::Tcp { host_port: host_port(uri, rest)? },
            "shm" => {
                if rest.is_empty() {
                    return Err(invalid(uri, "expected a socket path, e.g. shm:///tmp/lowlat.sock"));
                }
                Endpoint::Shm { path: PathBuf::from(rest) }
            }
            "eth" => {
                let (iface, peer) = iface_peer(uri, rest)?;
                Endpoint::Eth { iface, peer }
            }
            "xdp" => {
                let (iface, peer) = iface_peer(uri, rest)?;
                Endpoint::Xdp { iface, peer }
            }
            "onc+udp" => {
                let (host, port) = onc(uri, rest)?;
                Endpoint::OncUdp { host, port }
            }
            "onc+tcp" => {
                let (host, port) = onc(uri, rest)?;
                Endpoint::OncTcp { host, port }
            }
            other => {
                return Err(invalid(
                    uri,
                    format!("unknown scheme {other:?}; expected udp, tcp, shm, eth, xdp, onc+udp or onc+tcp"),
                ))
            }
        })
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.scheme())?;
        match self {
            Endpoint::Udp { host_port } | Endpoint::Tcp { host_port } => f.write_str(host_port),
            Endpoint::Shm { path } => write!(f, "{}", path.display()),
            Endpoint::Eth { iface, peer } | Endpoint::Xdp { iface, peer } => {
                f.write_str(iface)?;
                match peer {
                    Some(m) => write!(f, "/{m}"),
                    None => Ok(()),
                }
            }
            Endpoint::OncUdp { host, port } | Endpoint::OncTcp { host, port } => {
                f.write_str(host)?;
                match port {
                    Some(p) => write!(f, ":{p}"),
                    None => Ok(()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_scheme_and_prints_it_back() {
        for uri in [
            "udp://127.0.0.1:7000",
            "tcp://[::1]:7001",
            "shm:///tmp/x.sock",
            "eth://veth0",
            "eth://veth0/02:00:00:00:00:0a",
            "xdp://veth1/02:00:00:00:00:0b",
            "onc+udp://localhost",
            "onc+tcp://127.0.0.1:2049",
        ] {
            let e: Endpoint = uri.parse().unwrap();
            assert_eq!(e.to_string(), uri);
        }
    }

    #[test]
    fn rejects_bad_uris_with_reasons() {
        for (uri, needle) in [
            ("127.0.0.1:7000", "SCHEME://"),
            ("http://x:1", "unknown scheme"),
            ("udp://127.0.0.1", "HOST:PORT"),
            ("udp://127.0.0.1:99999", "port"),
            ("tcp://:80", "host is empty"),
            ("eth://veth0/zz:00", "MAC"),
            ("shm://", "socket path"),
            ("onc+udp://h:x", "port"),
        ] {
            let e = uri.parse::<Endpoint>().unwrap_err().to_string();
            assert!(e.contains(needle), "{uri}: {e}");
        }
    }

    /// Both separators are accepted (one per address), and every malformed address refused.
    #[test]
    fn mac_addresses_parse_and_print() {
        let m: Mac = "02:AB:cd:00:01:ff".parse().unwrap();
        assert_eq!(m.0, [2, 0xab, 0xcd, 0, 1, 0xff]);
        assert_eq!(m.to_string(), "02:ab:cd:00:01:ff");
        assert_eq!("02-ab-cd-00-01-ff".parse::<Mac>().unwrap(), m);
        assert_eq!("eth://v0/02-ab-cd-00-01-ff".parse::<Endpoint>().unwrap().to_string(), "eth://v0/02:ab:cd:00:01:ff");
        for bad in
            ["", "02:ab:cd:00:01", "02:ab:cd:00:01:ff:00", "0g:ab:cd:00:01:ff", "2:ab:cd:00:01:ff", "02:ab-cd:00:01:ff"]
        {
            assert!(bad.parse::<Mac>().is_err(), "{bad}");
        }
    }
}
