#!/usr/bin/env python3
"""What Python adds to a lowlat call: null-call p50/p99 from Python beside the Rust client, on
shm and udp, in one run against one server.

Per round and transport, three rows against the same `lowlat serve` (pinned to --server-cpu):

  rust     `lowlat bench URI --json` (the release binary, pinned to --client-cpu)
  in-py    `lowlat.bench(URI)`: the same Rust client loop, inside this process (the package's
           build); a control for how the package is built and for running inside Python
  python   `client.call("NULL")` in a Python loop, each call timed with time.perf_counter_ns()

and the Python overhead per call: python p50 - rust p50 (and p99). The cost of the timing itself
(two perf_counter_ns calls in the loop) is measured apart and printed, not subtracted. Rounds
alternate, so drift shows as disagreement between rounds rather than as a bias.

    cargo build --release -p lowlat-cli && scripts/deps/python.sh
    target/venv/bin/python python/bench/compare.py --calls 200000 --rounds 3

Figures are this machine's and this run's: compare rows of one run only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lowlat

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "idl" / "lab.x"


def quantiles(ns: list) -> tuple:
    ns.sort()
    return ns[len(ns) // 2], ns[min(len(ns) - 1, int(len(ns) * 0.99))]


def python_calls(uri: str, calls: int, warmup: int, spin: str) -> tuple:
    client = lowlat.Client(uri, idl=LAB, spin=spin)
    call = client.call
    for _ in range(warmup):
        call("NULL")
    clock = time.perf_counter_ns
    samples = [0] * calls
    for i in range(calls):
        t0 = clock()
        call("NULL")
        samples[i] = clock() - t0
    return quantiles(samples)


def timer_cost(n: int = 200_000) -> int:
    """p50 of an empty timed interval in the same loop shape."""
    clock = time.perf_counter_ns
    samples = [0] * n
    for i in range(n):
        t0 = clock()
        samples[i] = clock() - t0
    return quantiles(samples)[0]


def rust_bench(binary: Path, uri: str, calls: int, warmup: int, spin: str, cpu) -> tuple:
    cmd = [str(binary), "bench", uri, "--calls", str(calls), "--warmup", str(warmup), "--spin-us", spin, "--json"]
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["p50_ns"], r["p99_ns"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lowlat", type=Path, default=REPO / "target" / "release" / "lowlat", help="the lowlat binary")
    ap.add_argument("--calls", type=int, default=100_000, help="measured calls per row")
    ap.add_argument("--warmup", type=int, default=2_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--transports", default="shm,udp")
    ap.add_argument("--spin", default="adaptive", help="client and server spin: adaptive, forever or microseconds")
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--no-pin", action="store_true", help="pin neither side")
    args = ap.parse_args()
    if not args.lowlat.exists():
        print(f"{args.lowlat} not found: cargo build --release -p lowlat-cli", file=sys.stderr)
        return 2
    client_cpu = None if args.no_pin else args.client_cpu
    with tempfile.TemporaryDirectory(prefix="lowlat-compare-") as tmp:
        asked = {"shm": f"shm://{tmp}/lab.sock", "udp": "udp://127.0.0.1:0", "tcp": "tcp://127.0.0.1:0"}
        transports = args.transports.split(",")
        cmd = [str(args.lowlat), "serve", *(asked[t] for t in transports), "--spin-us", args.spin]
        if not args.no_pin:
            cmd += ["--cpu", str(args.server_cpu)]
        server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        try:
            uris = {}
            deadline = time.monotonic() + 20
            while len(uris) < len(transports):
                if time.monotonic() > deadline:
                    raise RuntimeError("lowlat serve did not start within 20 s")
                line = server.stdout.readline().strip()
                if line.startswith("serving "):
                    uri = line.removeprefix("serving ")
                    uris[uri.split("://")[0]] = uri
            if client_cpu is not None:
                os.sched_setaffinity(0, {client_cpu})
            timer = timer_cost()
            print(f"lowlat {args.lowlat}, {args.calls} calls per row, spin {args.spin}, "
                  f"client CPU {client_cpu}, server CPU {None if args.no_pin else args.server_cpu}; "
                  f"an empty timed interval in the Python loop: {timer} ns")
            print(f"{'round':>5} {'transport':>9} {'row':>6} {'p50 us':>8} {'p99 us':>8}")
            overhead = {t: [] for t in transports}
            for r in range(args.rounds):
                for t in transports:
                    uri = uris[t]
                    rows = {
                        "rust": rust_bench(args.lowlat, uri, args.calls, args.warmup, args.spin, client_cpu),
                        "in-py": (lambda s: (s["p50_ns"], s["p99_ns"]))(
                            lowlat.bench(uri, calls=args.calls, warmup=args.warmup, spin=args.spin)
                        ),
                        "python": python_calls(uri, args.calls, args.warmup, args.spin),
                    }
                    for name, (p50, p99) in rows.items():
                        print(f"{r + 1:>5} {t:>9} {name:>6} {p50 / 1000:>8.2f} {p99 / 1000:>8.2f}")
                    d50 = rows["python"][0] - rows["rust"][0]
                    d99 = rows["python"][1] - rows["rust"][1]
                    overhead[t].append(d50)
                    print(f"{r + 1:>5} {t:>9} {'+py':>6} {d50 / 1000:>8.2f} {d99 / 1000:>8.2f}   "
                          f"(python - rust)")
                    print(json.dumps({"round": r + 1, "transport": t, **{k: {"p50_ns": v[0], "p99_ns": v[1]}
                                                                        for k, v in rows.items()}}),
                          file=sys.stderr)
            for t in transports:
                o = overhead[t]
                print(f"Python overhead per null call over {t}: median {statistics.median(o) / 1000:.2f} us "
                      f"(rounds: {', '.join(f'{x / 1000:.2f}' for x in o)})")
        finally:
            server.terminate()
            server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
