"""A client over several servers from Python: the URI lists them, calls go to those that
answer, and a server that is not running is left out."""

import socket

import pytest

import lowlat
from conftest import LAB


def dead_udp() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return f"udp://127.0.0.1:{s.getsockname()[1]}"


def test_a_list_of_servers_one_of_them_down(lab_server):
    dead = dead_udp()
    c = lowlat.Client(f"{dead},{lab_server['udp']}", idl=LAB, deadline=2)
    for i in range(20):
        assert c.call("MINUS", [i, 1]) == i - 1
    assert c.call("NULL", idempotent=True) is None
    assert c.call("COUNT", idempotent=False) > 0


def test_no_server_of_a_list_running():
    with pytest.raises(lowlat.ServerNotRunningError, match="no server took the call") as e:
        lowlat.Client(f"{dead_udp()},{dead_udp()}", idl=LAB).call("NULL")
    assert not e.value.may_have_executed
