//! The checked-in include/lowlat.h must be what cbindgen makes of the crate now (set
//! LOWLAT_BLESS=1 to rewrite it), so the header C programs compile against never drifts from
//! the library they link.

use std::path::PathBuf;

#[test]
fn lowlat_h_is_up_to_date() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut made = Vec::new();
    bindings.write(&mut made);
    let made = String::from_utf8(made).expect("the header is UTF-8");
    let path = dir.join("include/lowlat.h");
    if std::env::var_os("LOWLAT_BLESS").is_some() {
        std::fs::write(&path, &made).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == made,
        "{} is stale: run `LOWLAT_BLESS=1 cargo test -p lowlat-c --test header`",
        path.display()
    );
}
