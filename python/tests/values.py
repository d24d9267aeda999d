"""everything.x values in the Python mapping: those of crates/dynamic/tests/support/mod.rs."""


def value_a() -> dict:
    """crates/dynamic/tests/support value_a, in Python values."""
    return {
        "prim": {
            "i": -7,
            "u": 4_000_000_000,
            "ushort_like": 65535,
            "h": -1_234_567_890_123,
            "uh": 18_000_000_000_000_000_000,
            "f": 1.5,
            "d": -2.25,
            "b": True,
            "c": "INFRA",
        },
        "h": bytes(range(16)),
        "data": bytes([1, 2, 3, 4, 5]),
        "fixed_bytes": b"xyz",
        "var_bytes": bytes([0xFF, 0]),
        "who": "alice",
        "note": "",
        "four": [1, -2, 3, -4],
        "many": [7, 8, 9],
        "corners": [{"x": 1, "y": 2}, {"x": 3, "y": 4}],
        "inners": [
            {"corner": {"x": 5, "y": 6}, "kind": "SQUARE", "tag": b""},
            {"corner": {"x": -1, "y": -1}, "kind": "TRIANGLE", "tag": b"abcdefgh"},
        ],
        "maybe_point": {"x": 9, "y": 10},
        "list": {"value": 1, "next": {"value": 2, "next": {"value": 3, "next": None}}},
        "r": {"which": "GREEN", "label": "green"},
        "bi": {"kind": 99, "raw": bytes([1, 2, 3])},
        "mt": {"present": True, "t": "hello"},
        "bu": {"tag": 7, "cs": [100, 200]},
        "names": ["a", "bc"],
        "hypers": [-1, 1 << 40],
        "flags": [True, False, True],
    }


def value_b(variant: int) -> dict:
    """The other union arms, no optional data, empty arrays and strings."""
    e = value_a()
    e["maybe_point"] = None
    e["list"] = None
    e["prim"].update(b=False, c="RED", f=-0.0, d=1e300)
    e["r"] = {"which": "RED", "code": -42}
    e["bi"] = [
        {"kind": 1, "p": {"x": 11, "y": -12}},
        {"kind": -5, "big": -(1 << 62)},
        {"kind": 2},
    ][variant]
    e["mt"] = {"present": False}
    e["bu"] = {"tag": 0, "d": 3.25}
    e.update(data=b"", var_bytes=b"12345", who="", note="a note with spaces", names=[], flags=[], many=[])
    e["inners"] = []
    return e


VALUES = [value_a(), value_b(0), value_b(1), value_b(2)]
