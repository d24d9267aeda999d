//! Compiles `inventory.x` into Rust stubs (`$OUT_DIR/inventory.rs`), which `src/lib.rs` includes;
//! with the async server trait too (`InventoryV1AsyncService`), which `src/async_service.rs`
//! implements.
fn main() {
    lowlat_build::Builder::new().async_service().compile(&["inventory.x"]).expect("inventory.x compiles");
}
