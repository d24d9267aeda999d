//! Serves idl/examples/everything.x (both versions, native and XDR bodies, so on every scheme)
//! with the semantics of tests/c/everything_peer.c, through the generated server traits: the
//! Rust server that the Python package's tests call.
//!
//! `everything_server URI...` prints each URI it serves (real ports where 0 was asked for), one
//! per line, then serves until its standard input closes: a parent that dies takes it along.

#[path = "../tests/support/mod.rs"]
mod support;

use std::io::Write;

fn main() {
    let uris: Vec<String> = std::env::args().skip(1).collect();
    if uris.is_empty() {
        eprintln!("usage: everything_server URI...");
        std::process::exit(2);
    }
    let uris: Vec<&str> = uris.iter().map(String::as_str).collect();
    let server = support::serve_everything(&uris, Default::default());
    let mut out = std::io::stdout().lock();
    for u in server.local_uris() {
        let _ = writeln!(out, "{u}");
    }
    let _ = out.flush();
    drop(out);
    let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
    server.shutdown();
}
