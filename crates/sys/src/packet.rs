//! Raw AF_PACKET sockets that see every frame on one interface, whatever its EtherType: what a
//! relay between two interfaces (the fault relay over eth:// and xdp://) reads and writes. The
//! lowlat transport's own AF_PACKET socket (lowlat-eth) binds lowlat's EtherType and is not this.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// An AF_PACKET socket bound to one interface for every EtherType, non-blocking.
pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: i32,
}

impl PacketSocket {
    /// Opens it on interface `iface` (needs CAP_NET_RAW).
    pub fn open(iface: &str) -> io::Result<PacketSocket> {
        let name = std::ffi::CString::new(iface).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: `name` is a live NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::last_os_error());
        }
        let all = (libc::ETH_P_ALL as u16).to_be() as libc::c_int;
        // SAFETY: socket(2) takes no pointers.
        let raw = crate::cvt(unsafe {
            libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, all)
        })?;
        // SAFETY: `raw` is a descriptor socket(2) just returned, owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_ll is plain data, valid all-zero.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a live sockaddr_ll of the size passed; the kernel only reads it.
        crate::cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        Ok(PacketSocket { fd, ifindex: ifindex as i32 })
    }

    /// The next frame that arrived on the interface (not one sent from it), whole, into `buf`:
    /// its length (`None`: nothing waiting). A frame longer than `buf` is an error.
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            // SAFETY: sockaddr_ll is plain data, valid all-zero.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: `buf`, `from` and `len` are live and sized as passed; the kernel writes at
            // most `buf.len()` bytes into `buf` and `len` bytes into `from`.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_TRUNC,
                    (&mut from as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock => Ok(None),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(e),
                };
            }
            if from.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            let n = n as usize;
            if n > buf.len() {
                return Err(io::Error::new(io::ErrorKind::InvalidData, format!("a frame of {n} bytes")));
            }
            return Ok(Some(n));
        }
    }

    /// Sends `frame` (a whole Ethernet frame, as given) out of the interface.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: sockaddr_ll is plain data, valid all-zero.
        let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        to.sll_family = libc::AF_PACKET as u16;
        // The frame carries its own addresses: the interface is all the kernel needs.
        to.sll_ifindex = self.ifindex;
        // SAFETY: `frame` and `to` are live and sized as passed; the kernel only reads them.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&to as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame sent on the loopback interface comes back once, whole, as an arrival (its
    /// outgoing copy is not reported). Needs CAP_NET_RAW: skipped otherwise.
    #[test]
    fn a_frame_sent_on_loopback_is_received_whole() {
        let s = match PacketSocket::open("lo") {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return eprintln!("SKIPPED: {e}"),
            Err(e) => panic!("{e}"),
        };
        let mut frame = vec![0u8; 60];
        frame[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // the local experimental EtherType
        let tag = crate::random::u64().unwrap().to_be_bytes();
        frame[14..22].copy_from_slice(&tag);
        s.send(&frame).unwrap();
        let mut buf = [0u8; 2048];
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            assert!(std::time::Instant::now() < end, "the frame did not come back within 5 s");
            match s.try_recv(&mut buf).unwrap() {
                Some(n) if buf[14..22] == tag => {
                    assert_eq!(&buf[..n], &frame[..]);
                    assert_eq!(s.try_recv(&mut buf).unwrap().filter(|_| buf[14..22] == tag), None, "once");
                    return;
                }
                Some(_) => {}
                None => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
    }
}
