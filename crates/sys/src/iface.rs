//! What the kernel says about a network interface (index, MTU, MAC address, driver, IPv4
//! address, interrupt coalescing), read with ioctls in the calling thread's network namespace.

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

/// `struct ethtool_coalesce` (linux/ethtool.h): the command word, then 22 `u32` settings.
#[repr(C)]
struct EthtoolCoalesce {
    cmd: u32,
    fields: [u32; 22],
}

const ETHTOOL_GCOALESCE: u32 = 0x0e;

/// An interface's interrupt coalescing, as `ethtool -c` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coalescing {
    /// Microseconds the NIC waits after a received frame before interrupting.
    pub rx_usecs: u32,
    /// Received frames it gathers before interrupting.
    pub rx_frames: u32,
    /// Microseconds it waits after a sent frame before interrupting.
    pub tx_usecs: u32,
    /// Sent frames it gathers before interrupting.
    pub tx_frames: u32,
    /// Whether the driver adapts the receive settings to the packet rate.
    pub adaptive_rx: bool,
    /// Whether the driver adapts the send settings to the packet rate.
    pub adaptive_tx: bool,
}

fn new_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Interface `name`'s interrupt coalescing (ETHTOOL_GCOALESCE). Drivers without it (veth,
/// loopback) answer EOPNOTSUPP.
pub fn coalescing(name: &str) -> io::Result<Coalescing> {
    let mut req = ifreq_for(name)?;
    let fd = new_socket()?;
    let mut c = EthtoolCoalesce { cmd: ETHTOOL_GCOALESCE, fields: [0; 22] };
    req.ifr_ifru.ifru_data = &mut c as *mut EthtoolCoalesce as *mut libc::c_char;
    // SAFETY: `req` names the interface and points at `c`, a live ethtool_coalesce of the
    // kernel's layout that the kernel fills in; both outlive the call.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, &mut req as *mut libc::ifreq) })?;
    // The order of struct ethtool_coalesce: rx usecs, rx frames, their _irq pair, tx usecs, tx
    // frames, their _irq pair, the stats block's usecs, then the two adaptive flags.
    let f = c.fields;
    Ok(Coalescing {
        rx_usecs: f[0],
        rx_frames: f[1],
        tx_usecs: f[4],
        tx_frames: f[5],
        adaptive_rx: f[9] != 0,
        adaptive_tx: f[10] != 0,
    })
}

/// Interface `name`'s IPv4 address (SIOCGIFADDR); EADDRNOTAVAIL when it has none.
pub fn ipv4_address(name: &str) -> io::Result<std::net::Ipv4Addr> {
    let mut req = ifreq_for(name)?;
    let fd = new_socket()?;
    ioctl(&fd, libc::SIOCGIFADDR, &mut req)?;
    // SAFETY: SIOCGIFADDR filled the ifru_addr member with an AF_INET address, whose layout
    // is sockaddr_in's (the two structures have the same size).
    let sin: libc::sockaddr_in = unsafe { std::mem::transmute(req.ifr_ifru.ifru_addr) };
    Ok(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
}

/// The interfaces of the calling thread's network namespace, by name (from `/sys/class/net`,
/// which shows the namespace of whoever mounted `/sys`: the caller's when it was started there,
/// as `ip netns exec` arranges). Sorted.
pub fn interface_names() -> io::Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/net")?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    names.sort();
    Ok(names)
}

/// The interface holding IPv4 address `addr`, if one does.
pub fn interface_with_address(addr: std::net::Ipv4Addr) -> io::Result<Option<String>> {
    Ok(interface_names()?.into_iter().find(|n| ipv4_address(n).is_ok_and(|a| a == addr)))
}

/// Looks interface `name` up. A name no interface can have is `InvalidInput`; a missing
/// interface is the kernel's ENODEV.
pub fn interface(name: &str) -> io::Result<Interface> {
    let mut req = ifreq_for(name)?;
    let fd = new_socket()?;
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

    #[test]
    fn loopback_address_and_coalescing() {
        assert_eq!(ipv4_address("lo").unwrap(), std::net::Ipv4Addr::LOCALHOST);
        assert_eq!(interface_with_address(std::net::Ipv4Addr::LOCALHOST).unwrap().as_deref(), Some("lo"));
        assert!(interface_names().unwrap().iter().any(|n| n == "lo"));
        // Loopback has no coalescing to tell: an error, not made-up settings.
        assert!(coalescing("lo").is_err());
        assert_eq!(ipv4_address("nosuchif0").unwrap_err().raw_os_error(), Some(libc::ENODEV));
    }
}
