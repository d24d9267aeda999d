"""Every construct of idl/examples/everything.x, called from Python over udp, tcp, shm and ONC
RPC, against the Rust server (generated stubs) and against a Python server: what goes out comes
back, in the Python mapping of docs/json-mapping.md."""

import math

import pytest

import lowlat
from conftest import EVERYTHING, SCHEMES
from values import VALUES, value_a


@pytest.fixture(params=SCHEMES)
def clients(request, everything):
    """Clients of both versions over one scheme, against one kind of server."""
    scheme = request.param
    v1 = lowlat.Client(everything.v1[scheme], idl=EVERYTHING, version="EVERYTHING_V1")
    v2 = lowlat.Client(everything.v2[scheme], idl=EVERYTHING, version=2)
    return v1, v2


@pytest.mark.parametrize("value", VALUES, ids=["a", "b0", "b1", "b2"])
def test_roundtrip_of_every_construct(clients, value):
    v1, _ = clients
    got = v1.call("ROUNDTRIP", value)
    assert got == value
    # -0.0 == 0.0 in Python: the sign must survive too.
    assert math.copysign(1.0, got["prim"]["f"]) == math.copysign(1.0, value["prim"]["f"])
    assert isinstance(got["h"], bytes) and isinstance(got["prim"]["uh"], int)


def test_every_procedure(clients):
    v1, v2 = clients
    assert v1.call("PING") is None
    assert v2.call("PING") is None
    assert v1.call("ADD", [7, -3]) == 4
    assert v1.call("ADD", {"arg1": 2**31 - 1, "arg2": 1}) == -(2**31), "int arithmetic wraps on both servers"
    assert v1.call("CONCAT", {"a": b"ab", "b": b"xyz"}) == b"abxyz"
    assert v1.call("concat", [b"", b""]) == b"", "names are case-insensitive"
    assert v1.call("GREET", "bob") == "hello, bob"
    assert v1.call("GREET", "Grüße") == "hello, Grüße"
    assert v1.call("LOOKUP", ["key", "BLUE"]) == {"which": "BLUE", "label": "key"}
    assert v1.call("LOOKUP", ["four", 0]) == {"which": "RED", "code": 4}, "an enum member by number"
    assert v1.call("LOOKUP", ("x", "INFRA")) == {"which": "INFRA"}, "a void arm: the discriminant alone"
    nodes = {"value": 1, "next": {"value": 2, "next": {"value": 3, "next": None}}}
    assert v2.call("REVERSE", nodes) == {"value": 3, "next": {"value": 2, "next": {"value": 1, "next": None}}}


def test_python_values_json_cannot_hold(clients):
    """Floats keep NaN and infinities; 64-bit integers are ints at their limits; enum members
    given by number come back by name; tuples and bytearrays are accepted."""
    v1, _ = clients
    e = value_a()
    e["prim"].update(h=-(2**63), uh=2**64 - 1, f=float("inf"), d=float("nan"), c=2)
    e["hypers"] = (2**63 - 1, -(2**63))
    e["data"] = bytearray(b"\x00\x01")
    got = v1.call("ROUNDTRIP", e)
    assert got["prim"]["h"] == -(2**63) and got["prim"]["uh"] == 2**64 - 1
    assert got["prim"]["f"] == float("inf") and math.isnan(got["prim"]["d"])
    assert got["prim"]["c"] == "BLUE"
    assert got["hypers"] == [2**63 - 1, -(2**63)]
    assert got["data"] == b"\x00\x01"


def test_a_long_list_and_large_opaque_data(clients):
    v1, v2 = clients
    node = None
    for i in range(500):
        node = {"value": i, "next": node}
    back = v2.call("REVERSE", node)
    first = []
    while back is not None and len(first) < 3:
        first.append(back["value"])
        back = back["next"]
    assert first == [0, 1, 2]
    big = bytes(i % 251 for i in range(30_000))  # within one ONC RPC datagram too
    assert v1.call("CONCAT", [big, b"!"]) == big + b"!"
