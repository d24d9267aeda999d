//! Fault injection for tests and the lab: an XDP program that corrupts frames on an interface's
//! receive path, so that end-to-end checksums and retransmission are exercised for real.

use lowlat_eth::bpf::{self, Link, Program, XdpMode};
use lowlat_eth::ifinfo::IfInfo;
use lowlat_eth::Result;

/// Corrupts about one in `2^shift` received frames of lowlat's EtherType on an interface while
/// it lives. The interface can hold no other XDP program meanwhile.
pub struct Corruptor {
    _link: Link,
    _prog: Program,
}

impl Corruptor {
    /// Loads the corrupting program and attaches it (generic XDP) to `iface`, flipping bits in
    /// about one in `2^shift` frames until the `Corruptor` is dropped.
    pub fn attach(iface: &str, shift: u32) -> Result<Corruptor> {
        let info = IfInfo::get(iface)?;
        let prog = Program::load_xdp("lowlat_corrupt", &bpf::corrupt_program(shift))?;
        let (link, _) = bpf::attach_best(&prog, info.index, iface, &info.driver, Some(XdpMode::Generic))?;
        Ok(Corruptor { _link: link, _prog: prog })
    }
}
