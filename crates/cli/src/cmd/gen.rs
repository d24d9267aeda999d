//! `lowlat gen`: stubs from an interface definition (.x).

use std::path::PathBuf;

/// Compile an interface definition (the ONC RPC language, a .x file) into stubs.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The .x file.
    file: PathBuf,
    /// Target language: rust, c (a .h and a .c over liblowlat), or wireshark (a .lua that lets
    /// lowlat's Wireshark dissector, wireshark/lowlat.lua, read the procedures' bodies).
    #[arg(long, default_value = "rust")]
    lang: String,
    /// Directory to write the generated files into (created if missing).
    #[arg(long, default_value = ".")]
    out: PathBuf,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let Args { file, lang, out } = args;
    let lang: lowlat_idl::Lang = lang.parse().map_err(|e: lowlat_idl::IdlError| e.to_string())?;
    // The error already names file:line:column and shows the line with a caret.
    let files = lowlat_idl::compile_file(&file, lang).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&out).map_err(|e| format!("create {}: {e}", out.display()))?;
    for (name, text) in files {
        let path = out.join(&name);
        std::fs::write(&path, text).map_err(|e| format!("write {}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
