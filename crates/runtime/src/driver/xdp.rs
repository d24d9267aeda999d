//! lowlat over AF_XDP (`xdp://IFACE[/PEER-MAC]`): lowlat's XDP program steers frames of lowlat's
//! EtherType into one AF_XDP socket per interface queue. An interface queue takes only one such
//! socket, so a client's slots share it through `lowlat_eth::shared` (a mutex and a mailbox per
//! slot); a server endpoint owns its socket (`eth::FrameServer`). As over eth://, the engine
//! retransmits.
//!
//! The XDP program is attached with a bpf link when the socket opens and detached when the last
//! channel (client) or the endpoint (server) closes, or when the process dies.

use std::io;
use std::time::Duration;

use lowlat_eth::shared::{SharedXdp, XdpHandle};
use lowlat_eth::{Mac, XdpConfig};

use super::eth::{discovery_tries, eth_error, peer_mac, slot_of, to_io};
use super::{ClientChannel, WakeOn};
use crate::{ClientConfig, Error};

/// How long a parked async call over xdp:// waits before it polls the rings again.
const XDP_PARK: Duration = Duration::from_micros(200);

pub(crate) struct XdpClient {
    handle: XdpHandle,
    peer: Mac,
}

impl XdpClient {
    pub fn connect(uri: &str, iface: &str, peer: Option<Mac>, cfg: &ClientConfig) -> Result<XdpClient, Error> {
        let err = |e| eth_error(uri, "xdp", e);
        let shared =
            SharedXdp::get_or_open(iface, XdpConfig { checksum: cfg.checksum, ..XdpConfig::default() }).map_err(err)?;
        let (tries, interval) = discovery_tries(cfg);
        let peer = peer_mac(iface, peer, || shared.discover(tries, interval)).map_err(err)?;
        Ok(XdpClient { handle: shared.handle(), peer })
    }
}

impl ClientChannel for XdpClient {
    fn send(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        self.handle.send_to(self.peer, head, body).map_err(to_io)
    }

    fn try_recv(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<usize>> {
        let max = self.handle.shared().max_payload();
        if buf.len() < max {
            buf.resize(max, 0);
        }
        loop {
            let Some((n, src)) = self.handle.try_recv_from(buf).map_err(to_io)? else { return Ok(None) };
            if src == self.peer && slot_of(&buf[..n]).is_some() {
                return Ok(Some(n));
            }
        }
    }

    fn park(&mut self) -> io::Result<WakeOn> {
        // The interface's rings are shared by every slot and demultiplexed by whoever polls
        // them: no descriptor is this slot's alone, so a parked call looks again shortly.
        Ok(WakeOn::After(XDP_PARK))
    }

    fn block(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.handle.block(timeout).map_err(to_io)
    }

    fn max_frame(&self) -> usize {
        self.handle.shared().max_payload()
    }

    fn reliable(&self) -> bool {
        false
    }
}
