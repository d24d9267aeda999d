//! What the transports need to know about an interface: index, MTU and MAC address, read in the
//! calling thread's network namespace.

use crate::error::{Error, Result};
use crate::Mac;

/// An interface as seen from the calling thread's network namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfInfo {
    /// The interface's name.
    pub name: String,
    /// The kernel's index of the interface.
    pub index: u32,
    /// The MTU, in bytes: the largest Ethernet payload (our 4-byte shim included).
    pub mtu: u32,
    /// The interface's own address.
    pub mac: Mac,
    /// The driver's name (`veth`, `virtio_net`, ...), empty when the driver does not say.
    pub driver: String,
}

impl IfInfo {
    /// Looks the interface up. A missing interface is [`Error::NoInterface`].
    pub fn get(name: &str) -> Result<IfInfo> {
        if !lowlat_sys::iface::valid_interface_name(name) {
            return Err(Error::NoInterface { iface: name.to_string() });
        }
        let i = lowlat_sys::interface(name)
            .map_err(|e| Error::os("reading the interface's settings", "CAP_NET_RAW", name, e))?;
        Ok(IfInfo { name: name.to_string(), index: i.index, mtu: i.mtu, mac: Mac(i.mac), driver: i.driver })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_missing() {
        let lo = IfInfo::get("lo").unwrap();
        assert!(lo.index >= 1 && lo.mtu >= 1280);
        assert_eq!(lo.mac, Mac([0; 6]));
        // Loopback has no ethtool driver information.
        assert_eq!(lo.driver, "");
        let e = IfInfo::get("nosuchif0").unwrap_err();
        assert!(matches!(e, Error::NoInterface { .. }), "{e}");
        assert!(matches!(IfInfo::get("").unwrap_err(), Error::NoInterface { .. }));
        assert!(matches!(IfInfo::get("waytoolonginterfacename").unwrap_err(), Error::NoInterface { .. }));
    }
}
