//! Compiles `inventory.x` into Rust stubs (`$OUT_DIR/inventory.rs`), which `src/lib.rs` includes.
fn main() {
    lowlat_build::compile("inventory.x").expect("inventory.x compiles");
}
