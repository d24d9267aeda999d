//! The `.x` compiler on any text: it parses, checks and generates Rust stubs, or says what is
//! wrong and where; it never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lowlat_idl::{compile_str, Lang, Options, Source};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let src = Source::new("fuzz.x", text.into_owned());
    if let Err(e) = compile_str(&src, Lang::Rust, &Options::default()) {
        // The message names the file.
        assert!(e.to_string().contains("fuzz.x"), "{e}");
    }
});
