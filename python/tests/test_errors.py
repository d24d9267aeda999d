"""Errors as exceptions: unknown procedures, dead servers, arguments that do not fit, timeouts,
failing Python procedures; each with the message a Rust user reads and whether the procedure may
have run."""

import logging
import socket
import time

import pytest

import lowlat
from conftest import EVERYTHING, LAB
from values import value_a


def test_the_hierarchy():
    for cls in [
        lowlat.InterfaceError,
        lowlat.BindError,
        lowlat.ServerNotRunningError,
        lowlat.TimeoutError,
        lowlat.ConnectionLostError,
        lowlat.UnknownProcedureError,
        lowlat.BadArgumentsError,
        lowlat.ServerError,
    ]:
        assert issubclass(cls, lowlat.Error)
    assert issubclass(lowlat.TimeoutError, TimeoutError)
    assert issubclass(lowlat.BadArgumentsError, ValueError)
    assert issubclass(lowlat.ServerNotRunningError, ConnectionRefusedError)
    e = lowlat.TimeoutError("procedure 1 timed out", True)
    assert str(e) == "procedure 1 timed out" and e.may_have_executed


def test_interface_errors_list_the_choices(tmp_path):
    with pytest.raises(lowlat.InterfaceError, match="several versions; say which: EVERYTHING_V1 \\(1\\), EVERYTHING_V2 \\(2\\)"):
        lowlat.Server(idl=EVERYTHING)
    with pytest.raises(lowlat.InterfaceError, match="no version \"7\""):
        lowlat.Server(idl=EVERYTHING, version=7)
    with pytest.raises(lowlat.InterfaceError, match="no program \"NOPE\" in the interface; it has: EVERYTHING_PROG"):
        lowlat.Client("udp://127.0.0.1:1", idl=EVERYTHING, program="NOPE", version=1)
    with pytest.raises(lowlat.InterfaceError, match="missing.x"):
        lowlat.Server(idl=tmp_path / "missing.x")
    bad = tmp_path / "bad.x"
    bad.write_text("program P { version V { widget F(void) = 1; } = 1; } = 7;\n")
    with pytest.raises(lowlat.InterfaceError, match="bad.x:1:25: error: undefined type 'widget'"):
        lowlat.Server(idl=bad)


def test_unknown_procedures(everything):
    with pytest.raises(lowlat.UnknownProcedureError, match="no procedure \"NOPE\".*ROUNDTRIP") as e:
        lowlat.Client(everything.v1["udp"], idl=EVERYTHING, version=1).call("NOPE")
    assert not e.value.may_have_executed
    server = lowlat.Server(idl=EVERYTHING, version=1)
    with pytest.raises(lowlat.UnknownProcedureError):
        server.procedure("REVERSE")
    # In the interface, but not served.
    server.procedure("PING")(lambda: None)
    (uri,) = server.serve(["udp://127.0.0.1:0"], register=False)
    try:
        with pytest.raises(lowlat.UnknownProcedureError, match="procedure 2 of program 0x20004c4d version 1: the server has no such procedure") as e:
            lowlat.Client(uri, idl=EVERYTHING, version=1).call("ADD", [1, 2])
        assert not e.value.may_have_executed
    finally:
        server.stop()


def free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("scheme", ["udp", "tcp", "shm", "onc+tcp"])
def test_no_server_running(scheme, tmp_path):
    uri = {
        "udp": f"udp://127.0.0.1:{free_port(socket.SOCK_DGRAM)}",
        "tcp": f"tcp://127.0.0.1:{free_port(socket.SOCK_STREAM)}",
        "onc+tcp": f"onc+tcp://127.0.0.1:{free_port(socket.SOCK_STREAM)}",
        "shm": f"shm://{tmp_path}/nobody.sock",
    }[scheme]
    began = time.monotonic()
    with pytest.raises(lowlat.ServerNotRunningError, match="no server is running there") as e:
        lowlat.Client(uri, idl=LAB).call("NULL")
    assert not e.value.may_have_executed
    assert time.monotonic() - began < 2, "refused at once, not after a timeout"


def test_a_server_that_died(rust_server):
    c = lowlat.Client(rust_server.uris["udp"], idl=EVERYTHING, version=1, deadline=2)
    assert c.call("ADD", [1, 2]) == 3
    rust_server.stop()
    with pytest.raises(lowlat.Error) as e:
        c.call("ADD", [1, 2])
    assert isinstance(e.value, (lowlat.ServerNotRunningError, lowlat.ConnectionLostError, lowlat.TimeoutError))
    assert "udp://127.0.0.1" in str(e.value) or "procedure" in str(e.value)


BAD_ARGUMENTS = [
    ("ADD", {"arg1": "7", "arg2": 1}, "argument.arg1: expected an int, got str"),
    ("ADD", [True, 1], "argument.arg1: expected an int, got bool"),
    ("ADD", [1.5, 1], "argument.arg1: expected an int, got float"),
    ("ADD", [2**31, 1], "argument.arg1: 2147483648 is out of range for int"),
    ("ADD", [1], "argument: expected 2 arguments, got 1"),
    ("ADD", {"arg1": 1}, "argument: missing field \"arg2\""),
    ("ADD", {"arg1": 1, "arg2": 2, "arg3": 3}, "argument: no argument named \"arg3\""),
    ("ADD", 5, "argument: expected a list or a dict of 2 arguments, got int"),
    ("CONCAT", ["ab", b"x"], "argument.a: expected bytes, got str"),
    ("GREET", b"bob", "argument: expected a string, got bytes"),
    ("LOOKUP", ["k" * 33, "RED"], "argument.key: string longer than 32 (33 bytes)"),
    ("LOOKUP", ["k", "PURPLE"], "argument.hint: unknown color name \"PURPLE\""),
    ("LOOKUP", ["k", 5], "argument.hint: 5 is not a value of color"),
    ("PING", 1, "argument: the procedure takes no argument (void); got int"),
]


@pytest.mark.parametrize("proc,arg,message", BAD_ARGUMENTS)
def test_bad_arguments_are_refused_before_sending(everything, proc, arg, message):
    c = lowlat.Client(everything.v1["udp"], idl=EVERYTHING, version=1)
    with pytest.raises(lowlat.BadArgumentsError) as e:
        c.call(proc, arg)
    assert str(e.value).startswith(message), str(e.value)
    assert not e.value.may_have_executed


def test_bad_values_deep_inside_name_their_path(everything):
    c = lowlat.Client(everything.v1["shm"], idl=EVERYTHING, version=1)
    cases = [
        (lambda e: e["inners"][1].update(tag=b"123456789"), "argument.inners[1].tag: opaque longer than 8 (9 bytes)"),
        (lambda e: e["prim"].update(b=1), "argument.prim.b: expected true or false, got int"),
        (lambda e: e["prim"].update(uh=2**64), "argument.prim.uh: 18446744073709551616 is out of range for unsigned hyper"),
        (lambda e: e["prim"].update(uh=2**200), "argument.prim.uh: 1606938044258990275541962092341162602522202993782792835301376 is out of range"),
        (lambda e: e.update(four=[1, 2, 3]), "argument.four: int[4] needs exactly 4 elements, got 3"),
        (lambda e: e.update(h=b"short"), "argument.h: opaque[16] needs exactly 16 bytes, got 5"),
        (lambda e: e.update(r={"which": "RED", "label": "x"}), "argument.r: unexpected field \"label\""),
        (lambda e: e.update(bu={"tag": 3, "d": 1.0}), "argument.bu.tag: 3 selects no arm of by_uint"),
        (lambda e: e.update(corners=[{"x": 1}, {"x": 1, "y": 2}]), "argument.corners[0]: missing field \"y\""),
        (lambda e: e.update(maybe_point={1: 2}), "argument.maybe_point: keys must be field names (str), got int"),
        (lambda e: e.update(extra=1), "argument: everything has no field \"extra\""),
        (lambda e: e.update(flags="yes"), "argument.flags: expected a list, got str"),
    ]
    for change, message in cases:
        e = value_a()
        change(e)
        with pytest.raises(lowlat.BadArgumentsError) as err:
            c.call("ROUNDTRIP", e)
        assert str(err.value).startswith(message), str(err.value)


def test_a_deadline_cuts_a_slow_call_short():
    server = lowlat.Server(idl=LAB)
    server.procedure("MINUS")(lambda a, b: time.sleep(1.0) or a - b)
    (uri,) = server.serve(["udp://127.0.0.1:0"], register=False)
    try:
        c = lowlat.Client(uri, idl=LAB)
        began = time.monotonic()
        with pytest.raises(lowlat.TimeoutError, match="timed out after") as e:
            c.call("MINUS", [5, 2], deadline=0.2)
        assert 0.15 < time.monotonic() - began < 0.9
        assert e.value.may_have_executed, "the call was sent: it may have run"
        with pytest.raises(ValueError, match="deadline: -1 is not a positive number of seconds"):
            c.call("MINUS", [5, 2], deadline=-1)
    finally:
        server.stop()


def test_a_failing_python_procedure_is_a_server_error_and_is_logged(caplog):
    server = lowlat.Server(idl=LAB)

    @server.procedure("MINUS")
    def minus(a, b):
        raise ZeroDivisionError("no minus today")

    server.procedure("MAXRESULT")(lambda n: "not bytes")
    server.procedure("NULL")(lambda: None)
    uris = server.serve(["udp://127.0.0.1:0", "onc+udp://127.0.0.1:0"], register=False)
    try:
        for uri in uris:
            c = lowlat.Client(uri, idl=LAB)
            with caplog.at_level(logging.ERROR, logger="lowlat"):
                with pytest.raises(lowlat.ServerError) as e:
                    c.call("MINUS", [1, 2])
                assert e.value.may_have_executed
                with pytest.raises(lowlat.ServerError):
                    c.call("MAXRESULT", 3)
            assert c.call("NULL") is None, "the server keeps serving"
        raised = [r for r in caplog.records if r.name == "lowlat" and r.exc_info]
        assert raised and raised[0].exc_info[0] is ZeroDivisionError
        assert "no minus today" in caplog.text and "Traceback" in caplog.text
        assert "MAXRESULT: its result does not fit the interface: result: expected bytes, got str" in caplog.text
    finally:
        server.stop()


def test_server_lifecycle():
    server = lowlat.Server(idl=LAB)
    server.procedure("NULL")(lambda: None)
    with server:
        server.serve(["udp://127.0.0.1:0"], register=False)
        assert server.serving
        with pytest.raises(RuntimeError, match="already serving"):
            server.serve(["udp://127.0.0.1:0"], register=False)
        with pytest.raises(RuntimeError, match="register procedures before serve"):
            server.procedure("MINUS")(lambda a, b: a - b)
    assert not server.serving
    server.stop()  # twice is harmless
    with pytest.raises(lowlat.BindError, match="invalid endpoint"):
        server.serve(["carrier-pigeon://roof"], register=False)
