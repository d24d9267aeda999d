//! Registration with rpcbind: `rpcinfo -p` lists a running lowlat server's programs and stops
//! listing them once it shuts down; `rpcinfo -u` / `-t` get answers; a client without a port
//! finds the server through rpcbind. Starts rpcbind itself when none runs (and stops only that
//! one, by its PID).

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lowlat::{Client, Server, ServerConfig};
use lowlat_codec::Error as CodecError;
use lowlat_onc::rpcbind::Rpcbind;
use support::everything::everything_v1 as v1;

/// An rpcbind this test started, stopped when dropped.
struct OwnRpcbind(Option<Child>);

impl Drop for OwnRpcbind {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn ensure_rpcbind() -> Result<OwnRpcbind, String> {
    if Rpcbind::local().is_running() {
        return Ok(OwnRpcbind(None));
    }
    let bin = ["/usr/sbin/rpcbind", "/sbin/rpcbind"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .ok_or("rpcbind is not installed (package rpcbind; scripts/deps/base.sh)")?;
    // -f: stay in the foreground, so the PID is ours to stop. No warm start (-w): registrations
    // a previous rpcbind saved must not show up in this test.
    let child = Command::new(bin)
        .args(["-f"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start {bin}: {e}"))?;
    let own = OwnRpcbind(Some(child));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !Rpcbind::local().is_running() {
        if Instant::now() > deadline {
            return Err("rpcbind started but does not answer within 5 s (not root?)".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(own)
}

fn rpcinfo(args: &[&str]) -> (bool, String) {
    let (ok, out, err) = support::run_bounded(Command::new("rpcinfo").args(args), Duration::from_secs(10));
    (ok, format!("{out}{err}"))
}

fn listed(out: &str, prog: u32, vers: u32, proto: &str, port: u16) -> bool {
    out.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 4
            && f[0] == prog.to_string()
            && f[1] == vers.to_string()
            && f[2] == proto
            && f[3] == port.to_string()
    })
}

#[test]
fn rpcinfo_sees_registrations_while_serving_only() {
    if !Path::new("/usr/sbin/rpcinfo").exists() && !Path::new("/sbin/rpcinfo").exists() {
        assert!(std::env::var_os("CI").is_none(), "rpcinfo missing in CI");
        eprintln!("SKIPPED rpcinfo_sees_registrations_while_serving_only: rpcinfo not installed (package rpcbind)");
        return;
    }
    let _rpcbind = match ensure_rpcbind() {
        Ok(r) => r,
        Err(why) => {
            assert!(std::env::var_os("CI").is_none(), "rpcbind test cannot run in CI: {why}");
            eprintln!("SKIPPED rpcinfo_sees_registrations_while_serving_only: {why}");
            return;
        }
    };
    let prog = v1::PROGRAM;
    let [p1, p2] = support::programs_xdr();
    let server = Server::builder()
        .program(p1)
        .program(p2)
        .config(ServerConfig::default())
        .serve(&["onc+udp://127.0.0.1:0", "onc+tcp://127.0.0.1:0"])
        .unwrap();
    let port = |scheme: &str| -> u16 {
        let u = server.local_uris().into_iter().find(|u| u.starts_with(scheme)).unwrap();
        u.rsplit_once(':').unwrap().1.parse().unwrap()
    };
    let (udp, tcp) = (port("onc+udp"), port("onc+tcp"));
    let (ok, out) = rpcinfo(&["-p", "127.0.0.1"]);
    assert!(ok, "rpcinfo -p: {out}");
    for vers in [1, 2] {
        assert!(listed(&out, prog, vers, "udp", udp), "version {vers} udp {udp} not listed:\n{out}");
        assert!(listed(&out, prog, vers, "tcp", tcp), "version {vers} tcp {tcp} not listed:\n{out}");
    }
    for (flag, vers) in [("-u", "1"), ("-t", "1"), ("-u", "2"), ("-t", "2")] {
        let (ok, out) = rpcinfo(&[flag, "127.0.0.1", &prog.to_string(), vers]);
        assert!(ok && out.contains("ready and waiting"), "rpcinfo {flag} version {vers}: {out}");
    }
    // No port in the URI: the client asks rpcbind.
    for uri in ["onc+udp://127.0.0.1", "onc+tcp://127.0.0.1"] {
        let c = Client::connect(uri, prog, 1).unwrap();
        let sum = c
            .call(
                v1::ADD,
                |b| v1::encode_add_args_xdr(b, 2, 3).map_err(CodecError::from),
                |r| v1::decode_add_result_xdr(r).map_err(CodecError::from),
            )
            .unwrap();
        assert_eq!(sum, 5, "{uri}");
    }
    server.shutdown();
    let (ok, out) = rpcinfo(&["-p", "127.0.0.1"]);
    assert!(ok, "rpcinfo -p: {out}");
    assert!(
        !out.lines().any(|l| l.split_whitespace().next() == Some(&prog.to_string())),
        "still listed after shutdown:\n{out}"
    );
    // And a client now learns that nothing is registered.
    let e = Client::connect("onc+udp://127.0.0.1", prog, 1).unwrap_err();
    assert!(matches!(e, lowlat::Error::NotRegistered { .. }), "{e}");
}
