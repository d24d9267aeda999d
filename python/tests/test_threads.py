"""Many threads calling at once through one client, and the GIL released while lowlat waits:
tests that would hang or fail if a waiting call held it."""

import os
import signal
import threading
import time

import pytest

import lowlat
from conftest import EVERYTHING, LAB, wrap_int

THREADS = 8
CALLS = 250


@pytest.mark.parametrize("scheme", ["udp", "tcp", "shm", "onc+udp"])
def test_many_threads_share_one_client(everything, scheme):
    client = lowlat.Client(everything.v1[scheme], idl=EVERYTHING, version=1)
    wrong: list = []
    failed: list = []

    def caller(t: int) -> None:
        try:
            for i in range(CALLS):
                a, b = t * 1_000_000, i
                got = client.call("ADD", [a, b])
                if got != wrap_int(a + b):
                    wrong.append((t, i, got))
                if i % 50 == 0:
                    name = f"thread {t} call {i}"
                    if client.call("GREET", name) != f"hello, {name}":
                        wrong.append((t, i, "GREET"))
        except Exception as e:  # noqa: BLE001 (reported below)
            failed.append(e)

    threads = [threading.Thread(target=caller, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads), "callers still running after 120 s"
    assert not failed, failed[:3]
    assert not wrong, wrong[:3]


class Ticker:
    """A thread that counts while Python code can run."""

    def __init__(self) -> None:
        self.ticks = 0
        self.running = True
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while self.running:
            self.ticks += 1
            time.sleep(0.002)

    def stop(self) -> None:
        self.running = False
        self.thread.join(timeout=5)


def stop_process(pid: int) -> None:
    """SIGSTOP, then wait (5 s at most) until every thread of the process has stopped: the
    signal is delivered asynchronously, and a server polling on another CPU could still answer
    a call made just after `kill` returns."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        states = []
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/stat") as f:
                    # The state follows the command's closing parenthesis.
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:
                continue
        if states and all(s in ("T", "t") for s in states):
            return
        time.sleep(0.001)
    raise AssertionError(f"process {pid} did not stop within 5 s of SIGSTOP")


@pytest.mark.parametrize("scheme", ["udp", "shm"])
def test_a_waiting_call_releases_the_gil(rust_server, scheme):
    """A call to a paused server waits for its deadline; other Python threads run meanwhile.
    Had the call held the GIL, the ticker would not tick until the call failed."""
    client = lowlat.Client(rust_server.uris[scheme], idl=EVERYTHING, version=1)
    assert client.call("ADD", [1, 1]) == 2
    ticker = Ticker()
    try:
        stop_process(rust_server.proc.pid)
        before = ticker.ticks
        with pytest.raises(lowlat.TimeoutError):
            client.call("ADD", [2, 2], deadline=0.5)
        during = ticker.ticks - before
    finally:
        ticker.stop()
        os.kill(rust_server.proc.pid, signal.SIGCONT)
    # 0.5 s at one tick per ~2 ms is ~250; a loaded machine still gives dozens.
    assert during >= 20, f"only {during} ticks while the call waited"


def test_a_python_procedure_runs_while_its_caller_waits_in_the_same_process():
    """The server's thread needs the GIL to run the procedure while the calling thread waits:
    a call that held it would deadlock until its deadline."""
    server = lowlat.Server(idl=LAB)
    seen = []

    @server.procedure("MINUS")
    def minus(a, b):
        seen.append(threading.current_thread() is not threading.main_thread())
        return a - b

    uris = server.serve(["udp://127.0.0.1:0", "tcp://127.0.0.1:0", "shm:///tmp/lowlat-py-gil-%d.sock" % os.getpid()],
                        register=False)
    try:
        for uri in uris:
            assert lowlat.Client(uri, idl=LAB, deadline=2).call("MINUS", [9, 4]) == 5
        assert seen == [True] * len(uris), "procedures run on the server's own threads"
    finally:
        server.stop()


def test_many_threads_against_a_python_server_in_the_same_process():
    server = lowlat.Server(idl=LAB)
    server.procedure("MINUS")(lambda a, b: a - b)
    server.procedure("ECHO")(lambda d: d)
    (uri,) = server.serve(["shm:///tmp/lowlat-py-threads-%d.sock" % os.getpid()], register=False)
    client = lowlat.Client(uri, idl=LAB, deadline=5)
    errors: list = []

    def caller(t: int) -> None:
        try:
            for i in range(100):
                assert client.call("MINUS", [t, i]) == t - i
                assert client.call("ECHO", bytes([t]) * i) == bytes([t]) * i
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=caller, args=(t,)) for t in range(THREADS)]
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=60)
        assert not any(th.is_alive() for th in threads)
        assert not errors, errors[:3]
    finally:
        server.stop()


def test_a_long_running_procedure_does_not_hold_up_others():
    """long_running=True: the slow procedure runs on the worker pool, so a fast call on the same
    endpoint is answered while it runs."""
    server = lowlat.Server(idl=LAB)
    server.procedure("ECHO", long_running=True)(lambda d: time.sleep(0.5) or d)
    server.procedure("MINUS")(lambda a, b: a - b)
    (uri,) = server.serve(["udp://127.0.0.1:0"], register=False)
    try:
        slow = lowlat.Client(uri, idl=LAB)
        fast = lowlat.Client(uri, idl=LAB)
        result: list = []
        t = threading.Thread(target=lambda: result.append(slow.call("ECHO", b"slow")))
        t.start()
        time.sleep(0.05)
        began = time.monotonic()
        assert fast.call("MINUS", [3, 1]) == 2
        assert time.monotonic() - began < 0.3, "the fast call waited for the slow one"
        t.join(timeout=5)
        assert result == [b"slow"]
    finally:
        server.stop()
