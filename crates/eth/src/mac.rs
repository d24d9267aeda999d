//! Ethernet (MAC) addresses.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// A 48-bit Ethernet address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    pub const BROADCAST: Mac = Mac([0xff; 6]);
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }
}

impl FromStr for Mac {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for b in out.iter_mut() {
            let p = parts.next().ok_or_else(|| Error::BadMac(s.to_string()))?;
            if p.len() != 2 {
                return Err(Error::BadMac(s.to_string()));
            }
            *b = u8::from_str_radix(p, 16).map_err(|_| Error::BadMac(s.to_string()))?;
        }
        if parts.next().is_some() {
            return Err(Error::BadMac(s.to_string()));
        }
        Ok(Mac(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let m: Mac = "02:AB:cd:00:01:ff".parse().unwrap();
        assert_eq!(m.0, [2, 0xab, 0xcd, 0, 1, 0xff]);
        assert_eq!(m.to_string(), "02:ab:cd:00:01:ff");
        for bad in ["", "02:ab:cd:00:01", "02:ab:cd:00:01:ff:00", "0g:ab:cd:00:01:ff", "2:ab:cd:00:01:ff"] {
            assert!(bad.parse::<Mac>().is_err(), "{bad}");
        }
    }
}
