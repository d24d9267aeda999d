//! Compiles `.x` interface definitions to Rust from `build.rs`.
