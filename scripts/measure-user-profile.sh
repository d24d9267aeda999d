#!/usr/bin/env bash
# The null call as a user's project gets it: a separate cargo project with `lowlat` as a path
# dependency (a NULL-procedure server and a client timing null calls), built once with cargo's
# default release profile and once with the profile lowlat is measured with (fat LTO, one code
# unit); then ROUNDS alternating rounds over shm and udp (server on CPU 1, client on CPU 0,
# both busy-polling; p50 and p99 in ns), and the client's instructions per call under callgrind
# with blocking waits (the difference between 11,000 and 22,000 calls, whole program).
#   scripts/measure-user-profile.sh            # ROUNDS=5
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dir="$(mktemp -d /tmp/lowlat-user-profile.XXXXXX)"
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/src"
cat > "$dir/Cargo.toml" <<TOML
[package]
name = "userproj"
version = "0.1.0"
edition = "2021"

[dependencies]
lowlat = { path = "$repo/crates/runtime" }
TOML
cat > "$dir/src/main.rs" <<'RUST'
use std::io::Read;
use std::time::Instant;

use lowlat::{Client, ClientConfig, Program, Server, ServerConfig, SpinPolicy};

const PROG: u32 = 0x2000_7777;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let spin = if std::env::var_os("BLOCK").is_some() { SpinPolicy::Block } else { SpinPolicy::Forever };
    match args[0].as_str() {
        "serve" => {
            let cfg = ServerConfig { spin, ..ServerConfig::default() };
            let p = Program::new(PROG, 1).procedure(0, "NULL", |_, _, _| Ok(()));
            let server = Server::builder().program(p).config(cfg).serve(&[&args[1]]).unwrap();
            println!("{}", server.local_uris()[0]);
            let _ = std::io::stdin().read(&mut [0u8; 1]);
        }
        _ => {
            let calls: usize = args[2].parse().unwrap();
            let c = Client::connect_with(&args[1], PROG, 1, ClientConfig { spin, ..ClientConfig::default() }).unwrap();
            let null = || c.call(0, |_| Ok::<_, lowlat::DecodeError>(()), |_| Ok(())).unwrap();
            for _ in 0..calls / 10 {
                null();
            }
            let mut t = Vec::with_capacity(calls);
            for _ in 0..calls {
                let s = Instant::now();
                null();
                t.push(s.elapsed().as_nanos() as u64);
            }
            t.sort_unstable();
            println!("p50 {} p99 {}", t[calls / 2], t[calls * 99 / 100]);
        }
    }
}
RUST
cd "$dir"
CARGO_TARGET_DIR="$dir/t-default" cargo build --release -q
CARGO_TARGET_DIR="$dir/t-lto" CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 cargo build --release -q

serve() { # variant uri-to-listen: starts the server, sets SRV_PID and URI
  coproc SRV { taskset -c 1 "$dir/t-$1/release/userproj" serve "$2"; }
  read -r URI <&"${SRV[0]}"
}
stop() { kill "$SRV_PID" 2>/dev/null || true; wait "$SRV_PID" 2>/dev/null || true; }

echo "round scheme profile: null call p50 / p99 (ns)"
for r in $(seq "${ROUNDS:-5}"); do
  for scheme in shm udp; do
    for v in default lto; do
      if [ "$scheme" = shm ]; then listen="shm://$dir/$v.sock"; n=300000; else listen=udp://127.0.0.1:0; n=50000; fi
      serve "$v" "$listen"
      echo "$r $scheme $v: $(taskset -c 0 "$dir/t-$v/release/userproj" call "$URI" "$n")"
      stop
    done
  done
done

if command -v valgrind >/dev/null; then
  echo "client instructions per null call (callgrind, blocking waits, whole program)"
  for scheme in shm udp; do
    for v in default lto; do
      if [ "$scheme" = shm ]; then listen="shm://$dir/c-$v.sock"; else listen=udp://127.0.0.1:0; fi
      export BLOCK=1
      serve "$v" "$listen"
      counts=()
      for n in 10000 20000; do
        valgrind --tool=callgrind --callgrind-out-file="$dir/cg-$n" "$dir/t-$v/release/userproj" call "$URI" "$n" >/dev/null 2>&1
        counts+=("$(awk '/^(summary|totals):/{print $2; exit}' "$dir/cg-$n")")
      done
      unset BLOCK
      echo "$scheme $v: $(( (counts[1] - counts[0]) / 11000 ))"
      stop
    done
  done
fi
