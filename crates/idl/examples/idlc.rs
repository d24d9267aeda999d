//! Compiles a `.x` file and prints the Rust code, or the diagnostics: `cargo run -p lowlat-idl
//! --example idlc -- FILE.x`.

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: idlc FILE.x");
        std::process::exit(2);
    };
    match lowlat_idl::compile_file(&path, lowlat_idl::Lang::Rust) {
        Ok(files) => {
            for (_, contents) in files {
                print!("{contents}");
            }
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
