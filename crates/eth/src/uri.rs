//! `eth://IFACE[/PEER-MAC]` and `xdp://IFACE[/PEER-MAC]`.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;
use crate::mac::Mac;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// AF_PACKET.
    Eth,
    /// AF_XDP.
    Xdp,
}

/// A parsed raw-Ethernet endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub scheme: Scheme,
    pub iface: String,
    /// The peer; None means "find it by discovery" (clients) or "anyone" (servers).
    pub peer: Option<Mac>,
}

impl FromStr for Endpoint {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = |why| Error::BadUri { uri: s.to_string(), why };
        let (scheme, rest) = if let Some(r) = s.strip_prefix("eth://") {
            (Scheme::Eth, r)
        } else if let Some(r) = s.strip_prefix("xdp://") {
            (Scheme::Xdp, r)
        } else {
            return Err(bad("expected eth://IFACE[/PEER-MAC] or xdp://IFACE[/PEER-MAC]"));
        };
        let (iface, peer) = match rest.split_once('/') {
            Some((i, "")) => (i, None),
            Some((i, m)) => (i, Some(m.parse::<Mac>()?)),
            None => (rest, None),
        };
        if iface.is_empty() || iface.len() >= libc::IFNAMSIZ {
            return Err(bad("interface name must be 1 to 15 characters"));
        }
        Ok(Endpoint { scheme, iface: iface.to_string(), peer })
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self.scheme {
            Scheme::Eth => "eth",
            Scheme::Xdp => "xdp",
        };
        write!(f, "{s}://{}", self.iface)?;
        if let Some(p) = self.peer {
            write!(f, "/{p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        let e: Endpoint = "eth://veth0".parse().unwrap();
        assert_eq!((e.scheme, e.iface.as_str(), e.peer), (Scheme::Eth, "veth0", None));
        let e: Endpoint = "xdp://ll1x2a/02:00:00:00:00:01".parse().unwrap();
        assert_eq!(e.peer, Some(Mac([2, 0, 0, 0, 0, 1])));
        assert_eq!(e.to_string(), "xdp://ll1x2a/02:00:00:00:00:01");
        for bad in ["udp://x", "eth://", "eth://aaaaaaaaaaaaaaaaaaa", "eth://x/zz"] {
            assert!(bad.parse::<Endpoint>().is_err(), "{bad}");
        }
    }
}
