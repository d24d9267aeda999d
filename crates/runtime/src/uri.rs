//! Endpoint URIs: `udp://HOST:PORT`, `tcp://HOST:PORT`, `shm://PATH`, `eth://IFACE[/PEER-MAC]`,
//! `xdp://IFACE[/PEER-MAC]`, `onc+udp://HOST[:PORT]`, `onc+tcp://HOST[:PORT]`.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::Error;

/// A parsed endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Udp { host_port: String },
    Tcp { host_port: String },
    Shm { path: PathBuf },
    Eth { iface: String, peer: Option<[u8; 6]> },
    Xdp { iface: String, peer: Option<[u8; 6]> },
    OncUdp { host: String, port: Option<u16> },
    OncTcp { host: String, port: Option<u16> },
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
}

fn invalid(uri: &str, reason: impl Into<String>) -> Error {
    Error::InvalidUri { uri: uri.to_string(), reason: reason.into() }
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in mac.iter_mut() {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

fn host_port(uri: &str, rest: &str) -> Result<String, Error> {
    let Some((host, port)) = rest.rsplit_once(':') else {
        return Err(invalid(uri, "expected HOST:PORT, e.g. udp://127.0.0.1:7000"));
    };
    if host.is_empty() {
        return Err(invalid(uri, "the host is empty"));
    }
    port.parse::<u16>().map_err(|_| invalid(uri, format!("port {port:?} is not a number from 0 to 65535")))?;
    Ok(rest.to_string())
}

fn iface_peer(uri: &str, rest: &str) -> Result<(String, Option<[u8; 6]>), Error> {
    let (iface, peer) = match rest.split_once('/') {
        Some((i, p)) => (i, Some(p)),
        None => (rest, None),
    };
    if iface.is_empty() || iface.len() > 15 {
        return Err(invalid(uri, "expected an interface name of 1 to 15 characters, e.g. eth://veth0"));
    }
    let peer = match peer {
        None | Some("") => None,
        Some(p) => Some(
            parse_mac(p).ok_or_else(|| invalid(uri, format!("{p:?} is not a MAC address like 02:00:00:00:00:01")))?,
        ),
    };
    Ok((iface.to_string(), peer))
}

fn onc(uri: &str, rest: &str) -> Result<(String, Option<u16>), Error> {
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
    type Err = Error;
    fn from_str(uri: &str) -> Result<Endpoint, Error> {
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

fn fmt_mac(f: &mut fmt::Formatter<'_>, m: &[u8; 6]) -> fmt::Result {
    write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.scheme())?;
        match self {
            Endpoint::Udp { host_port } | Endpoint::Tcp { host_port } => f.write_str(host_port),
            Endpoint::Shm { path } => write!(f, "{}", path.display()),
            Endpoint::Eth { iface, peer } | Endpoint::Xdp { iface, peer } => {
                f.write_str(iface)?;
                if let Some(m) = peer {
                    f.write_str("/")?;
                    fmt_mac(f, m)?;
                }
                Ok(())
            }
            Endpoint::OncUdp { host, port } | Endpoint::OncTcp { host, port } => {
                f.write_str(host)?;
                if let Some(p) = port {
                    write!(f, ":{p}")?;
                }
                Ok(())
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
}
