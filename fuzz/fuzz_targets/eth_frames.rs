//! lowlat's raw Ethernet frames and discovery messages, as AF_PACKET and AF_XDP receive them
//! from anyone on the link: parsing never panics, and a frame accepted with its checksum
//! required says a payload that lies within it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lowlat_eth::frame::{self, discovery};

fuzz_target!(|data: &[u8]| {
    for require_crc in [false, true] {
        if let Ok(p) = frame::parse(data, require_crc) {
            assert!(frame::HEADER_LEN + p.len <= data.len());
        }
    }
    for magic in [discovery::REQUEST, discovery::REPLY] {
        if let Some(nonce) = discovery::decode(magic, data) {
            assert_eq!(discovery::decode(magic, &discovery::encode(magic, nonce)), Some(nonce));
        }
    }
});
