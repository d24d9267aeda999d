//! Source allowlists: blocks of IP addresses (`10.0.0.0/8`, `127.0.0.1`, `::1/128`) whose
//! datagrams and connections an endpoint serves. Everything else is dropped before anything of
//! it is read: silently, as a firewall drops, so that the server neither tells a stranger it
//! exists nor sends anything to an address a datagram may have forged.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// A block of IP addresses: an address and how many of its leading bits a member shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

/// Why a block could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid address block {text:?}: {reason} (expected ADDRESS[/BITS], e.g. 10.0.0.0/8 or ::1)")]
pub struct CidrError {
    text: String,
    reason: &'static str,
}

impl Cidr {
    /// Whether `ip` lies in the block (an IPv4 address seen as IPv6, `::ffff:a.b.c.d`, counts as
    /// the IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let (a, b) = (self.addr.to_canonical(), ip.to_canonical());
        let prefix = u32::from(self.prefix);
        match (a, b) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
                u32::from(a) & mask == u32::from(b) & mask
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
                u128::from(a) & mask == u128::from(b) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Cidr, CidrError> {
        let err = |reason| CidrError { text: s.to_string(), reason };
        let (addr, bits) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| err("not an IP address"))?;
        let addr = addr.to_canonical();
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match bits {
            None => max,
            Some(b) => b.parse::<u8>().ok().filter(|&p| p <= max).ok_or(err("the prefix length is out of range"))?,
        };
        Ok(Cidr { addr, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Whether an endpoint with the allowlist `list` serves `ip`: every address when the list is
/// empty.
pub fn allowed(list: &[Cidr], ip: IpAddr) -> bool {
    list.is_empty() || list.iter().any(|c| c.contains(ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn blocks_contain_what_their_prefix_says() {
        let net: Cidr = "10.1.0.0/16".parse().unwrap();
        assert!(net.contains(ip("10.1.255.3")));
        assert!(!net.contains(ip("10.2.0.1")));
        assert!(net.contains(ip("::ffff:10.1.2.3")), "an IPv4 address seen as IPv6");
        assert!(!net.contains(ip("::1")));
        let one: Cidr = "127.0.0.1".parse().unwrap();
        assert!(one.contains(ip("127.0.0.1")) && !one.contains(ip("127.0.0.2")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("192.0.2.1")));
        let v6: Cidr = "fd00::/8".parse().unwrap();
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
        assert_eq!(v6.to_string(), "fd00::/8");
        assert!(allowed(&[], ip("192.0.2.1")));
        assert!(!allowed(&[one], ip("192.0.2.1")));
    }

    #[test]
    fn bad_blocks_are_refused_with_the_reason() {
        for bad in ["10.0.0.0/33", "::/129", "nonsense", "10.0.0.0/x", ""] {
            let e = bad.parse::<Cidr>().unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains("expected"), "{e}");
        }
    }
}
