//! Namespaces, veth pairs and XDP programs are gone after a test, however it ended.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lowlat_eth::{XdpConfig, XdpSocket};
use lowlat_testkit::testhosts::TestHosts;

fn ip(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().expect("running ip");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn xdp_attached(ns: &str, iface: &str) -> bool {
    ip(&["-n", ns, "link", "show", "dev", iface]).contains("prog/xdp")
}

fn assert_gone(ns: &[String], ifaces: &[String]) {
    let netns = ip(&["netns", "list"]);
    let links = ip(&["-o", "link"]);
    for n in ns {
        assert!(!netns.contains(n.as_str()) && !TestHosts::exists(n), "namespace {n} left behind:\n{netns}");
    }
    for i in ifaces {
        assert!(!links.contains(i.as_str()), "interface {i} left behind:\n{links}");
    }
}

/// (namespaces, interfaces)
type Names = (Vec<String>, Vec<String>);

#[test]
fn gone_after_a_panicking_test() {
    if common::hosts(1500).is_none() {
        return;
    }
    let seen: Arc<Mutex<Option<Names>>> = Arc::default();
    let s = seen.clone();
    let r = std::panic::catch_unwind(move || {
        let h = common::hosts(1500).unwrap();
        *s.lock().unwrap() = Some((vec![h.a.ns.clone(), h.b.ns.clone()], vec![h.a.iface.clone(), h.b.iface.clone()]));
        let iface = h.a.iface.clone();
        let x = common::join(h.a.spawn(move || XdpSocket::open(&iface, XdpConfig::default()).unwrap()), 5);
        assert!(xdp_attached(&h.a.ns, &h.a.iface));
        // Closing the socket detaches the program.
        x.close();
        assert!(!xdp_attached(&h.a.ns, &h.a.iface), "XDP program still attached after close");
        let iface = h.a.iface.clone();
        let _x = common::join(h.a.spawn(move || XdpSocket::open(&iface, XdpConfig::default()).unwrap()), 5);
        assert!(xdp_attached(&h.a.ns, &h.a.iface));
        panic!("deliberate failure inside the test hosts' scope");
    });
    assert!(r.is_err());
    let (ns, ifaces) = seen.lock().unwrap().take().unwrap();
    assert_gone(&ns, &ifaces);
}

/// Run by `gone_after_the_process_is_killed` in a child process: creates test hosts with an XDP
/// program attached, reports their names, and waits to be killed.
#[test]
#[ignore = "helper, run in a child process"]
fn helper_create_and_wait() {
    if std::env::var_os("LOWLAT_ETH_CLEANUP_CHILD").is_none() {
        return;
    }
    let h = common::hosts(1500).unwrap();
    let iface = h.a.iface.clone();
    let _x = common::join(h.a.spawn(move || XdpSocket::open(&iface, XdpConfig::default()).unwrap()), 5);
    println!("HOSTS {} {} {} {}", h.a.ns, h.b.ns, h.a.iface, h.b.iface);
    std::thread::sleep(Duration::from_secs(20));
}

#[test]
fn gone_after_the_process_is_killed() {
    if common::hosts(1500).is_none() {
        return;
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "helper_create_and_wait", "--ignored", "--nocapture", "--test-threads=1"])
        .env("LOWLAT_ETH_CLEANUP_CHILD", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            // libtest prints "test NAME ... " on the same line first.
            if let Some(rest) = line.split_once("HOSTS ").map(|(_, r)| r) {
                let _ = tx.send(rest.split(' ').map(String::from).collect::<Vec<_>>());
                return;
            }
        }
    });
    let names = rx.recv_timeout(Duration::from_secs(10));
    // Our own child's PID, not yet reaped, so not reused.
    lowlat_sys::kill(pid).unwrap();
    child.wait().unwrap();
    let names = names.expect("child did not report its test hosts");
    // The watcher notices the death and removes everything; give it a bounded moment.
    let end = Instant::now() + Duration::from_secs(5);
    while (TestHosts::exists(&names[0]) || TestHosts::exists(&names[1])) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Interfaces vanish with their namespace; give the kernel's cleanup work a moment too.
    std::thread::sleep(Duration::from_millis(100));
    assert_gone(&names[..2], &names[2..]);
}
