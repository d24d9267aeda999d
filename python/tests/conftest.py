"""Servers for the tests: the Rust server of everything.x (crates/dynamic/examples/
everything_server.rs, through the generated server traits), the same procedures in Python, and
`lowlat serve` (the lab interface) for the benchmark. Every process started here is stopped by
its PID; every wait is bounded."""

import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

import lowlat

REPO = Path(__file__).resolve().parents[2]
EVERYTHING = REPO / "idl" / "examples" / "everything.x"
LAB = REPO / "idl" / "lab.x"
SCHEMES = ["udp", "tcp", "shm", "onc+udp", "onc+tcp"]
# Building a binary the suite needs may take minutes on a busy two-core machine.
BUILD_SECONDS = 1800
START_SECONDS = 20


def cargo_binary(package: str, name: str, example: bool = False) -> Path:
    """Builds (if needed) and locates a binary of the workspace, in the test suite's profile."""
    kind = "--example" if example else "--bin"
    subprocess.run(
        ["cargo", "build", "--quiet", "--profile", "test-release", "-p", package, kind, name],
        cwd=REPO,
        check=True,
        timeout=BUILD_SECONDS,
    )
    meta = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=60,
    )
    target = Path(json.loads(meta.stdout)["target_directory"]) / "test-release"
    return target / "examples" / name if example else target / name


def read_lines(proc: subprocess.Popen, count: int, until: str = "") -> list[str]:
    """The first `count` lines a process prints (or its lines up to `until`), within
    START_SECONDS; the process is killed if it does not say them in time."""
    lines: "queue.Queue[str]" = queue.Queue()

    def reader() -> None:
        for line in proc.stdout:
            lines.put(line.strip())

    threading.Thread(target=reader, daemon=True).start()
    got = []
    try:
        while len(got) < count:
            line = lines.get(timeout=START_SECONDS)
            if line == until:
                break
            got.append(line)
    except queue.Empty:
        stop_process(proc)
        raise RuntimeError(f"{proc.args[0]} said {got} in {START_SECONDS} s, not {count} lines")
    return got


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Stops a process this suite started, by its PID: `sig`, then SIGKILL after 10 s."""
    if proc.poll() is None:
        os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def uris_to_ask(tmp: Path, tag: str) -> list[str]:
    """One URI per scheme, with port 0 and a fresh socket path."""
    return [
        f"shm://{tmp / f'{tag}.sock'}" if s == "shm" else f"{s}://127.0.0.1:0"
        for s in SCHEMES
    ]


def by_scheme(uris: list[str]) -> dict[str, str]:
    return {u.split("://")[0]: u for u in uris}


class RustServer:
    """everything_server serving both versions of everything.x on every scheme."""

    def __init__(self, binary: Path, tmp: Path):
        asked = uris_to_ask(tmp, "rust")
        self.proc = subprocess.Popen(
            [str(binary), *asked], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.uris = by_scheme(read_lines(self.proc, len(asked)))

    def stop(self) -> None:
        # It serves until its standard input closes.
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            stop_process(self.proc, signal.SIGKILL)


def wrap_int(n: int) -> int:
    """`n` as a 32-bit two's complement int, as C and the Rust server compute ADD."""
    return (n + 2**31) % 2**32 - 2**31


def lookup(key: str, hint: str) -> dict:
    """LOOKUP's rule (crates/dynamic/tests/c/everything_peer.c)."""
    if hint == "RED":
        return {"which": "RED", "code": len(key.encode())}
    if hint in ("GREEN", "BLUE"):
        return {"which": hint, "label": key}
    return {"which": hint}


def reverse(node: dict) -> dict:
    values = []
    while node is not None:
        values.append(node["value"])
        node = node["next"]
    out = None
    for v in values:
        out = {"value": v, "next": out}
    return out


def python_servers() -> tuple:
    """everything.x's two versions served by Python procedures with the Rust server's rules."""
    v1 = lowlat.Server(idl=EVERYTHING, program="EVERYTHING_PROG", version=1)
    v1.procedure("PING")(lambda: None)
    v1.procedure("ROUNDTRIP")(lambda e: e)
    v1.procedure("ADD")(lambda a, b: wrap_int(a + b))
    v1.procedure("CONCAT")(lambda a, b: a + b)
    v1.procedure("GREET")(lambda who: f"hello, {who}")
    v1.procedure("LOOKUP")(lookup)
    v2 = lowlat.Server(idl=EVERYTHING, version="EVERYTHING_V2")
    v2.procedure("PING")(lambda: None)
    v2.procedure("REVERSE")(reverse)
    return v1, v2


@dataclass
class Endpoints:
    """Where version 1 and version 2 of everything.x are served, by scheme."""

    kind: str
    v1: dict
    v2: dict


@pytest.fixture(scope="session")
def everything_server_binary() -> Path:
    return cargo_binary("lowlat-dynamic", "everything_server", example=True)


@pytest.fixture(scope="session")
def lowlat_binary() -> Path:
    return cargo_binary("lowlat-cli", "lowlat")


@pytest.fixture(scope="session", params=["rust", "python"])
def everything(request, everything_server_binary) -> Endpoints:
    """everything.x served by the Rust server, then by the Python one."""
    with tempfile.TemporaryDirectory(prefix="lowlat-py-") as tmp:
        tmp = Path(tmp)
        if request.param == "rust":
            server = RustServer(everything_server_binary, tmp)
            try:
                yield Endpoints("rust", server.uris, server.uris)
            finally:
                server.stop()
        else:
            v1, v2 = python_servers()
            try:
                u1 = by_scheme(v1.serve(uris_to_ask(tmp, "v1"), register=False))
                u2 = by_scheme(v2.serve(uris_to_ask(tmp, "v2"), register=False))
                yield Endpoints("python", u1, u2)
            finally:
                v1.stop()
                v2.stop()


@pytest.fixture
def rust_server(everything_server_binary, tmp_path) -> RustServer:
    """A Rust server of the test's own (to stop, pause or kill)."""
    server = RustServer(everything_server_binary, tmp_path)
    yield server
    if server.proc.poll() is None:
        os.kill(server.proc.pid, signal.SIGCONT)
    server.stop()


@pytest.fixture(scope="session")
def lab_server(lowlat_binary) -> dict:
    """`lowlat serve` (the lab interface) on udp and shm."""
    with tempfile.TemporaryDirectory(prefix="lowlat-py-lab-") as tmp:
        proc = subprocess.Popen(
            [str(lowlat_binary), "serve", "udp://127.0.0.1:0", f"shm://{tmp}/lab.sock"],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            lines = read_lines(proc, 3, until="ready")
            yield by_scheme([line.removeprefix("serving ") for line in lines])
        finally:
            stop_process(proc)
