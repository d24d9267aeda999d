"""A pre-shared key and encryption from Python, against `lowlat serve --psk-file KEY --encrypt`."""

import subprocess
import tempfile
from pathlib import Path

import pytest

import lowlat
from conftest import LAB, read_lines, stop_process


@pytest.fixture(scope="module")
def keyed_server(lowlat_binary):
    """The lab interface over udp, keyed and encrypting every session; yields (uri, key file)."""
    with tempfile.TemporaryDirectory(prefix="lowlat-py-key-") as tmp:
        key = Path(tmp) / "key"
        key.write_bytes(b"thirty-two bytes of a shared key")
        proc = subprocess.Popen(
            [str(lowlat_binary), "serve", "udp://127.0.0.1:0", "--psk-file", str(key), "--encrypt"],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            lines = read_lines(proc, 2, until="ready")
            yield lines[0].removeprefix("serving "), key
        finally:
            stop_process(proc)


def test_an_encrypted_client_calls(keyed_server):
    uri, key = keyed_server
    c = lowlat.Client(uri, LAB, psk_file=key, encrypt=True)
    assert c.call("MINUS", [5, 7]) == -2
    assert c.call("ECHO", b"not for the path") == b"not for the path"


def test_a_client_that_does_not_encrypt_is_refused_and_told_why(keyed_server):
    uri, key = keyed_server
    with pytest.raises(lowlat.BindError, match="--encrypt"):
        lowlat.Client(uri, LAB, psk_file=key)


def test_a_missing_key_file_is_an_error(keyed_server):
    uri, _ = keyed_server
    with pytest.raises(lowlat.Error, match="nonexistent"):
        lowlat.Client(uri, LAB, psk_file="/nonexistent/key", encrypt=True)
