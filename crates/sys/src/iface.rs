//! What the kernel says about a network interface (index, MTU, MAC address, driver), read with
//! ioctls in the calling thread's network namespace.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::cvt;

/// An interface as seen from the calling thread's network namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// The kernel's index of the interface.
    pub index: u32,
    /// The MTU, in bytes.
    pub mtu: u32,
    /// The interface's own hardware address.
    pub mac: [u8; 6],
    /// The driver's name (`veth`, `virtio_net`, ...), empty when the driver does not say.
    pub driver: String,
}

/// Whether `name` can name an interface at all (1 to 15 bytes, no `/`, space or NUL).
pub fn valid_interface_name(name: &str) -> bool {
    !(name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(['/', ' ', '\0']))
}

fn ifreq_for(name: &str) -> io::Result<libc::ifreq> {
    if !valid_interface_name(name) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not an interface name"));
    }
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(req)
}

fn ioctl(fd: &OwnedFd, op: libc::c_ulong, req: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: `req` is a live, initialised ifreq with a NUL-terminated name; these SIOCGIF*
    // requests only write inside it.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), op as _, req as *mut libc::ifreq) }).map(|_| ())
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

/// Looks interface `name` up. A name no interface can have is `InvalidInput`; a missing
/// interface is the kernel's ENODEV.
pub fn interface(name: &str) -> io::Result<Interface> {
    let mut req = ifreq_for(name)?;
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    ioctl(&fd, libc::SIOCGIFINDEX, &mut req)?;
    // SAFETY: SIOCGIFINDEX filled the ifru_ifindex member of the union.
    let index = unsafe { req.ifr_ifru.ifru_ifindex } as u32;
    ioctl(&fd, libc::SIOCGIFMTU, &mut req)?;
    // SAFETY: SIOCGIFMTU filled the ifru_mtu member.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu } as u32;
    ioctl(&fd, libc::SIOCGIFHWADDR, &mut req)?;
    // SAFETY: SIOCGIFHWADDR filled the ifru_hwaddr member.
    let hw = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(hw.sa_data.iter()) {
        *d = *s as u8;
    }
    let driver = driver_name(&fd, &mut req).unwrap_or_default();
    Ok(Interface { index, mtu, mac, driver })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_missing() {
        let lo = interface("lo").unwrap();
        assert!(lo.index >= 1 && lo.mtu >= 1280);
        assert_eq!(lo.mac, [0; 6]);
        // Loopback has no ethtool driver information.
        assert_eq!(lo.driver, "");
        assert_eq!(interface("nosuchif0").unwrap_err().raw_os_error(), Some(libc::ENODEV));
        for bad in ["", "waytoolonginterfacename", "a/b"] {
            assert_eq!(interface(bad).unwrap_err().kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
    }
}
