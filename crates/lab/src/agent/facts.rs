//! What a machine says of itself for a run across two hosts: the report's [`Machine`] (CPU,
//! kernel, host name) and the interface toward the other host (driver, link speed, interrupt
//! coalescing, addresses). A fact that cannot be read is left out, shown as unknown: a virtual
//! link has no speed, veth no coalescing, and neither is an error.

use std::net::{IpAddr, Ipv4Addr, UdpSocket};

use lowlat_report::{Machine, Nic};

/// This machine, with `iface` as its interface toward the other host.
pub fn describe(iface: Option<&str>) -> Machine {
    Machine { nic: iface.map(nic), ..Machine::detect() }
}

/// What the kernel says of interface `name`.
pub fn nic(name: &str) -> Nic {
    let info = lowlat_sys::interface(name).ok();
    let speed = std::fs::read_to_string(format!("/sys/class/net/{name}/speed"))
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        // A link that does not know its speed says -1 (or nothing).
        .and_then(|s| u32::try_from(s).ok())
        .filter(|s| *s > 0);
    Nic {
        name: name.to_string(),
        mac: info.as_ref().map(|i| lowlat_addr::Mac(i.mac).to_string()),
        address: lowlat_sys::iface::ipv4_address(name).ok().map(|a| a.to_string()),
        driver: info.as_ref().map(|i| i.driver.clone()).filter(|d| !d.is_empty()),
        speed_mbps: speed,
        coalescing: lowlat_sys::iface::coalescing(name).ok().map(|c| {
            let off = |b: bool| if b { "on" } else { "off" };
            format!(
                "rx {} us/{} frames, tx {} us/{} frames, adaptive rx {}, tx {}",
                c.rx_usecs,
                c.rx_frames,
                c.tx_usecs,
                c.tx_frames,
                off(c.adaptive_rx),
                off(c.adaptive_tx)
            )
        }),
        mtu: info.map(|i| i.mtu),
    }
}

/// The local IPv4 address and interface this machine reaches `peer` from (the route the
/// kernel picks, found by connecting a UDP socket, which sends nothing).
pub fn interface_toward(peer: IpAddr) -> Option<(String, Ipv4Addr)> {
    let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    s.connect((peer, 9)).ok()?;
    let IpAddr::V4(local) = s.local_addr().ok()?.ip() else { return None };
    let name = lowlat_sys::iface::interface_with_address(local).ok()??;
    Some((name, local))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_reached_from_lo() {
        let (name, addr) = interface_toward(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
        assert_eq!((name.as_str(), addr), ("lo", Ipv4Addr::LOCALHOST));
        let n = nic("lo");
        assert_eq!(n.address.as_deref(), Some("127.0.0.1"));
        // Loopback has neither a driver that says its name, a speed nor coalescing: unknown.
        assert_eq!((n.driver, n.speed_mbps, n.coalescing), (None, None, None));
        let m = describe(Some("lo"));
        assert_eq!(m.nic.unwrap().name, "lo");
        assert!(!m.kernel.is_empty());
    }

    #[test]
    fn a_missing_interface_is_unknown_not_an_error() {
        let n = nic("nosuchif0");
        assert_eq!(n, Nic { name: "nosuchif0".into(), ..Nic::default() });
    }
}
