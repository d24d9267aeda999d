//! lowlat's frame header and the payloads of binds, fragment acknowledgements and errors:
//! whatever arrives, parsing never panics, and what parses emits the same bytes back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lowlat_proto::wire::{BindGrant, BindRefusal, BindRequest, ErrorMessage, Header, MAX_ERROR_MESSAGE};
use lowlat_proto::HEADER_LEN;

fuzz_target!(|data: &[u8]| {
    let Ok((h, body)) = Header::parse(data) else { return };
    let again = h.to_bytes();
    let (h2, rest) = Header::parse(&again).expect("an emitted header parses");
    assert_eq!(h, h2);
    assert!(rest.is_empty());
    // Every byte but the reserved one (5) comes back as it was.
    assert_eq!(again[..5], data[..5]);
    assert_eq!(again[6..HEADER_LEN], data[6..HEADER_LEN]);
    if let Ok(r) = BindRequest::parse(body) {
        assert_eq!(BindRequest::parse(&r.emit()), Ok(r));
    }
    if let Ok(g) = BindGrant::parse(body) {
        assert_eq!(BindGrant::parse(&g.emit()), Ok(g));
    }
    if let Ok(r) = BindRefusal::parse(body) {
        assert_eq!(BindRefusal::parse(&r.emit()), Ok(r));
    }
    match ErrorMessage::parse(body) {
        Ok(m) => assert_eq!(ErrorMessage::fit(m.as_bytes(), usize::MAX), m),
        Err(_) => {
            // What a server would send for these bytes instead: a bounded UTF-8 prefix.
            let fitted = ErrorMessage::fit(body, usize::MAX);
            assert!(fitted.as_bytes().len() <= MAX_ERROR_MESSAGE && body.starts_with(fitted.as_bytes()));
        }
    }
});
