//! The README's C example, taken from the README itself, built with the flags crates/c/lowlat.pc
//! gives (against liblowlat.so, then statically against liblowlat.a) and run against a lab
//! server: it prints what the README says.

extern crate runtime as lowlat;

mod support;

use std::process::Command;
use std::time::Duration;

/// The README's first C code block after "### From C".
fn readme_example() -> String {
    let readme = std::fs::read_to_string(support::root().join("README.md")).unwrap();
    let section = &readme[readme.find("### From C").expect("a From C section")..];
    let start = section.find("```c\n").expect("a C example") + 5;
    section[start..start + section[start..].find("```").unwrap()].to_string()
}

/// `pkg-config ARGS lowlat` with the in-tree lowlat.pc and `libdir` where the tests built it.
fn pkg_config(args: &[&str]) -> Option<Vec<String>> {
    let out = Command::new("pkg-config")
        .env("PKG_CONFIG_PATH", support::root().join("crates/c"))
        .arg(format!("--define-variable=libdir={}", support::lib_dir().display()))
        .args(args)
        .arg("lowlat")
        .output()
        .ok()?;
    assert!(out.status.success(), "pkg-config: {}", String::from_utf8_lossy(&out.stderr));
    Some(String::from_utf8(out.stdout).unwrap().split_whitespace().map(String::from).collect())
}

#[test]
fn the_readme_c_example_builds_with_pkg_config_and_prints_minus_two() {
    let test = "the_readme_c_example_builds_with_pkg_config_and_prints_minus_two";
    let no_pkg_config = Command::new("pkg-config").arg("--version").output().map_or(true, |o| !o.status.success());
    if support::skip(test, support::missing_gcc())
        || support::skip(test, no_pkg_config.then(|| "pkg-config not found (scripts/deps/c.sh)".into()))
    {
        return;
    }
    let server =
        lowlat::Server::builder().program(lowlat_lab::interface::program()).serve(&["udp://127.0.0.1:0"]).unwrap();
    let uri = server.local_uris()[0].clone();
    let dir = tempfile::tempdir().unwrap();
    let files = lowlat_idl::compile_file(support::root().join("idl/lab.x"), lowlat_idl::Lang::C).unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let example = readme_example().replace("udp://127.0.0.1:7000", &uri);
    std::fs::write(dir.path().join("minus.c"), example).unwrap();

    let shared = pkg_config(&["--cflags", "--libs"]).unwrap();
    let mut stat = pkg_config(&["--static", "--cflags", "--libs"]).unwrap();
    for flag in stat.iter_mut() {
        if flag == "-llowlat" {
            *flag = "-l:liblowlat.a".into();
        }
    }
    for (how, flags) in [("shared", shared), ("static", stat)] {
        let out = dir.path().join(format!("minus-{how}"));
        let o = Command::new("gcc")
            .current_dir(dir.path())
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "minus.c", "lab.c"])
            .args(&flags)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{how}: gcc {flags:?}:\n{}", String::from_utf8_lossy(&o.stderr));
        let (code, stdout, stderr) = support::run_bounded(&mut Command::new(&out), Duration::from_secs(30));
        assert_eq!((code, stdout.as_str()), (Some(0), "-2\n"), "{how}: {stderr}");
    }
    server.shutdown();
}
