"""Many calls in flight from one thread: `Client.call_many` against a Python server of the lab
interface. Results come back in order, each call's failure stays in its own place, and the calls
really overlap (eight 50 ms procedures on the server's worker pool take far less than 400 ms)."""

import time

import pytest

import lowlat
from conftest import LAB

SCHEMES = ["udp", "tcp", "shm", "onc+udp"]


class Refused(Exception):
    pass


def count():
    raise Refused("COUNT is not served here")


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> dict:
    """lab.x served by Python procedures; SPIN sleeps on the worker pool (4 threads)."""
    tmp = tmp_path_factory.mktemp("many")
    server = lowlat.Server(idl=LAB)
    server.procedure("NULL")(lambda: None)
    server.procedure("MINUS")(lambda a, b: a - b)
    server.procedure("ECHO")(lambda data: data)
    server.procedure("COUNT")(count)
    server.procedure("SPIN", long_running=True)(lambda us: time.sleep(us / 1e6))
    asked = [f"shm://{tmp / 'lab.sock'}" if s == "shm" else f"{s}://127.0.0.1:0" for s in SCHEMES]
    uris = server.serve(asked, register=False)
    try:
        yield {u.split("://")[0]: u for u in uris}
    finally:
        server.stop()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_64_calls_return_every_result_in_order(lab, scheme):
    client = lowlat.Client(lab[scheme], idl=LAB, slots=64, deadline=10.0)
    calls = []
    for i in range(64):
        calls.append(("MINUS", {"a": 1000 * i, "b": i}) if i % 2 else ("ECHO", bytes([i]) * i))
    results = client.call_many(calls)
    assert len(results) == 64
    for i, r in enumerate(results):
        assert r == (999 * i if i % 2 else bytes([i]) * i), (i, r)
    # The client goes on as before, and a second batch is answered alike.
    assert client.call("MINUS", [5, 7]) == -2
    assert client.call_many([("MINUS", [i, 1]) for i in range(64)]) == [i - 1 for i in range(64)]


def test_more_calls_than_slots_wait_for_one(lab):
    client = lowlat.Client(lab["udp"], idl=LAB, slots=2, deadline=10.0)
    assert client.call_many([("MINUS", [i, 0]) for i in range(100)]) == list(range(100))


def test_each_call_fails_alone(lab):
    client = lowlat.Client(lab["udp"], idl=LAB, deadline=10.0)
    results = client.call_many(
        [
            ("MINUS", [5, 7]),
            ("NO_SUCH_PROC", 1),
            ("MINUS", "not two ints"),
            ("COUNT",),
            "NULL",
            ("ECHO", b"after"),
        ]
    )
    assert results[0] == -2
    assert isinstance(results[1], lowlat.UnknownProcedureError), results[1]
    assert "NO_SUCH_PROC" in str(results[1]) and not results[1].may_have_executed
    assert isinstance(results[2], lowlat.BadArgumentsError), results[2]
    assert isinstance(results[3], lowlat.ServerError), results[3]
    assert results[3].may_have_executed
    assert results[4] is None
    assert results[5] == b"after"


def test_a_deadline_applies_to_each_call(lab):
    client = lowlat.Client(lab["udp"], idl=LAB, deadline=10.0)
    started = time.monotonic()
    results = client.call_many([("SPIN", 1_000_000), ("MINUS", [3, 1])], deadline=0.2)
    assert time.monotonic() - started < 1.5
    assert isinstance(results[0], lowlat.TimeoutError), results[0]
    assert results[1] == 2


@pytest.mark.parametrize("scheme", ["udp", "shm"])
def test_calls_overlap(lab, scheme):
    """Eight 50 ms procedures on four workers: about 100 ms in flight together, 400 ms one by
    one."""
    client = lowlat.Client(lab[scheme], idl=LAB, deadline=10.0)
    client.call("NULL")
    started = time.monotonic()
    results = client.call_many([("SPIN", 50_000)] * 8)
    took = time.monotonic() - started
    assert results == [None] * 8
    assert took < 0.3, f"8 calls of 50 ms took {took * 1000:.0f} ms: they did not overlap"


def test_odd_shapes(lab):
    client = lowlat.Client(lab["udp"], idl=LAB)
    assert client.call_many([]) == []
    with pytest.raises(TypeError, match="each call is"):
        client.call_many([("MINUS", [1, 2]), 42])
    with pytest.raises(ValueError, match="slots"):
        lowlat.Client(lab["udp"], idl=LAB, slots=0)
