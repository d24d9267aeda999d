//! What the transports need to know about an interface: index, MTU and MAC address, read in the
//! calling thread's network namespace.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

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

fn ifreq_for(name: &str) -> Result<libc::ifreq> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['/', ' ', '\0']) {
        return Err(Error::NoInterface { iface: name.to_string() });
    }
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(req)
}

fn ioctl(fd: &OwnedFd, op: libc::c_ulong, req: &mut libc::ifreq, name: &str) -> Result<()> {
    // SAFETY: `req` is a live, initialised ifreq with a NUL-terminated name; these SIOCGIF*
    // requests only write inside it.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), op as _, req as *mut libc::ifreq) };
    if r < 0 {
        return Err(Error::os("reading the interface's settings", "CAP_NET_RAW", name, io::Error::last_os_error()));
    }
    Ok(())
}

/// `struct ethtool_drvinfo` (linux/ethtool.h).
#[repr(C)]
struct DrvInfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GDRVINFO: u32 = 3;

fn driver_name(fd: &OwnedFd, req: &mut libc::ifreq) -> Option<String> {
    // SAFETY: plain data; zeroed is valid.
    let mut info: DrvInfo = unsafe { std::mem::zeroed() };
    info.cmd = ETHTOOL_GDRVINFO;
    req.ifr_ifru.ifru_data = &mut info as *mut DrvInfo as *mut libc::c_char;
    // SAFETY: `req` names the interface and points at `info`, a live ethtool_drvinfo the kernel
    // fills in; both outlive the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, req as *mut libc::ifreq) };
    if r < 0 {
        return None;
    }
    let end = info.driver.iter().position(|&b| b == 0).unwrap_or(info.driver.len());
    Some(String::from_utf8_lossy(&info.driver[..end]).into_owned())
}

impl IfInfo {
    /// Looks the interface up. A missing interface is [`Error::NoInterface`].
    pub fn get(name: &str) -> Result<IfInfo> {
        let mut req = ifreq_for(name)?;
        // SAFETY: plain socket(2) call; the result is checked before use.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(Error::io("opening a socket to query interfaces", io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        ioctl(&fd, libc::SIOCGIFINDEX, &mut req, name)?;
        // SAFETY: SIOCGIFINDEX filled the ifru_ifindex member of the union.
        let index = unsafe { req.ifr_ifru.ifru_ifindex } as u32;
        ioctl(&fd, libc::SIOCGIFMTU, &mut req, name)?;
        // SAFETY: SIOCGIFMTU filled the ifru_mtu member.
        let mtu = unsafe { req.ifr_ifru.ifru_mtu } as u32;
        ioctl(&fd, libc::SIOCGIFHWADDR, &mut req, name)?;
        // SAFETY: SIOCGIFHWADDR filled the ifru_hwaddr member.
        let hw = unsafe { req.ifr_ifru.ifru_hwaddr };
        let mut mac = [0u8; 6];
        for (d, s) in mac.iter_mut().zip(hw.sa_data.iter()) {
            *d = *s as u8;
        }
        let driver = driver_name(&fd, &mut req).unwrap_or_default();
        Ok(IfInfo { name: name.to_string(), index, mtu, mac: Mac(mac), driver })
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
