//! ONC RPC as a peer sends it: call and reply messages with their credentials, and TCP record
//! marking fed in arbitrary pieces. Parsing never panics; a parsed call encodes back to a call
//! that parses the same; records never exceed their limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lowlat_onc::msg::{encode_reply, peek_xid};
use lowlat_onc::{Call, RecordReader, Reply};

const MAX_RECORD: usize = 4096;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = Call::parse(data) {
        let mut again = Vec::new();
        c.header.encode(&c.cred.credential(), &mut again);
        again.extend_from_slice(c.args);
        let c2 = Call::parse(&again).expect("an encoded call parses");
        assert_eq!((c2.header, c2.cred.credential(), c2.args), (c.header, c.cred.credential(), c.args));
        assert_eq!(peek_xid(data), Some(c.header.xid));
    }
    if let Ok(r) = Reply::parse(data) {
        let mut again = Vec::new();
        encode_reply(r.xid, r.body, &mut again);
        let r2 = Reply::parse(&again).expect("an encoded reply parses");
        assert_eq!((r2.xid, r2.body), (r.xid, r.body));
    }
    // Record marking: the first byte chooses the piece size the stream arrives in.
    let Some((&piece, stream)) = data.split_first() else { return };
    let piece = piece as usize % 64 + 1;
    let mut rr = RecordReader::new(MAX_RECORD);
    for chunk in stream.chunks(piece) {
        let room = rr.buffer(chunk.len());
        room[..chunk.len()].copy_from_slice(chunk);
        rr.filled(chunk.len());
        loop {
            match rr.next_record() {
                Ok(Some(rec)) => assert!(rec.len() <= MAX_RECORD),
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
});
