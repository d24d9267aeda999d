//! Compiles the built-in `lab` interface (idl/lab.x) into Rust stubs.
fn main() {
    lowlat_build::compile("../../idl/lab.x").expect("idl/lab.x compiles");
}
