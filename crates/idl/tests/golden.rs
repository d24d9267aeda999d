//! Checked-in generated code must match the generator (set LOWLAT_BLESS=1 to rewrite it).
//! The other tests compile the checked-in files, so this also proves the generator's output
//! builds and passes clippy.

use std::path::PathBuf;

use lowlat_idl::{compile_str, Lang, Options, Source};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Compares what `lang` makes of `x` with the checked-in files `outs` (in the order generated).
fn check_files(x: &str, lang: Lang, outs: &[&str], opts: &Options) {
    let path = root().join(x);
    let text = std::fs::read_to_string(&path).unwrap();
    let files =
        compile_str(&Source::new(x.rsplit('/').next().unwrap(), text), lang, opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(files.len(), outs.len());
    for (file, out) in files.iter().zip(outs) {
        let golden = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/generated").join(out);
        if std::env::var_os("LOWLAT_BLESS").is_some() {
            std::fs::write(&golden, &file.contents).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&golden).unwrap_or_default();
        assert!(
            want == file.contents,
            "{} is stale: run `LOWLAT_BLESS=1 cargo test -p lowlat-idl --test golden`",
            golden.display()
        );
    }
}

fn check(x: &str, out: &str, opts: &Options) {
    check_files(x, Lang::Rust, &[out], opts);
}

/// Client and server, with the codec named by its own crate.
fn with_runtime() -> Options {
    Options { codec_path: "::lowlat_codec".into(), ..Options::default() }
}

#[test]
fn everything_with_runtime_is_up_to_date() {
    check("idl/examples/everything.x", "everything.rs", &with_runtime());
}

/// With the async server trait and its programs (`Options::async_service`). `everything.rs`
/// above is the same interface with the option off, the default: the option adds items and
/// changes none, so files generated before it existed are byte for byte what they were.
#[test]
fn everything_with_async_service_is_up_to_date() {
    check("idl/examples/everything.x", "everything_async.rs", &Options { async_service: true, ..with_runtime() });
}

/// The async trait's doc comment speaks of arguments, owned strings and opaque results only for
/// an interface that has them.
#[test]
fn the_async_trait_says_only_what_its_interface_has() {
    let doc_of = |x: &str| {
        let opts = Options { async_service: true, ..with_runtime() };
        let file = compile_str(&Source::new("t.x", x), Lang::Rust, &opts).unwrap_or_else(|e| panic!("{e}"));
        let text = &file[0].contents;
        let end = text.find("pub trait V1AsyncService").expect("the async trait is generated");
        let start = text[..end].rfind("/// The procedures of").unwrap();
        text[start..end].to_string()
    };
    let bare = doc_of("program P { version V1 { void PING(void) = 0; int NOW(void) = 1; } = 1; } = 0x20000098;");
    for absent in ["the arguments", "Strings and opaque data", "opaque result", "Arguments that do not decode"] {
        assert!(!bare.contains(absent), "{absent:?} in\n{bare}");
    }
    let full = doc_of(
        "typedef opaque buf<>; typedef string text<>;\nprogram P { version V1 { buf ECHO(text s, int n) = 1; } = 1; } = 0x20000098;",
    );
    for present in ["the arguments", "Strings and opaque data", "opaque result", "Arguments that do not decode"] {
        assert!(full.contains(present), "no {present:?} in\n{full}");
    }
}

#[test]
fn lab_with_runtime_is_up_to_date() {
    check("idl/lab.x", "lab.rs", &with_runtime());
}

#[test]
fn lab_types_only_is_up_to_date() {
    let opts = Options { runtime_path: None, ..with_runtime() };
    check("idl/lab.x", "lab_codec.rs", &opts);
}

/// The C stubs (crates/c's tests compile them with gcc -Werror and run them).
#[test]
fn everything_in_c_is_up_to_date() {
    check_files("idl/examples/everything.x", Lang::C, &["everything.h", "everything.c"], &Options::default());
}

#[test]
fn lab_in_c_is_up_to_date() {
    check_files("idl/lab.x", Lang::C, &["lab.h", "lab.c"], &Options::default());
}

/// The Wireshark tables (crates/cli/tests/wireshark.rs loads them into tshark with lowlat.lua and
/// reads captured calls with them).
#[test]
fn everything_for_wireshark_is_up_to_date() {
    check_files("idl/examples/everything.x", Lang::Wireshark, &["everything.lua"], &Options::default());
}

#[test]
fn lab_for_wireshark_is_up_to_date() {
    check_files("idl/lab.x", Lang::Wireshark, &["lab.lua"], &Options::default());
}

/// Field names never clash: a procedure of a later version gets `_v2`, a name met twice a
/// number; an interface named like one of lowlat.lua's own fields gets the prefix `idl_`.
#[test]
fn wireshark_field_names_are_unique() {
    let x = "struct echo { int x; };\nprogram P { version V1 { int ECHO(int x) = 1; } = 1;\n\
             version V2 { int ECHO(int x) = 1; echo ECHO_X(int y) = 2; } = 2; } = 0x20000099;";
    let files = compile_str(&Source::new("bind.x", x), Lang::Wireshark, &Options::default()).unwrap();
    assert_eq!(files[0].name, "bind.lua");
    let text = &files[0].contents;
    assert!(text.contains("Proto(\"lowlat.idl_bind\""), "{text}");
    let abbrevs: Vec<&str> = text.lines().filter_map(|l| l.split("ProtoField.").nth(1)?.split('"').nth(1)).collect();
    let mut unique = abbrevs.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), abbrevs.len(), "{abbrevs:?}");
    for want in ["lowlat.idl_bind.echo.x", "lowlat.idl_bind.echo.x_2", "lowlat.idl_bind.echo_v2.x"] {
        assert!(abbrevs.contains(&want), "{want} in {abbrevs:?}");
    }
}
