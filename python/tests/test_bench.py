"""lowlat.bench returns what `lowlat bench --json` prints; lowlat.load_results reads results.json
through lowlat's results model."""

import json
import subprocess
import threading
import time

import pytest

import lowlat


@pytest.mark.parametrize("scheme", ["udp", "shm"])
def test_bench_has_the_fields_of_bench_json(lab_server, lowlat_binary, scheme):
    uri = lab_server[scheme]
    cli = subprocess.run(
        [str(lowlat_binary), "bench", uri, "--calls", "200", "--warmup", "10", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    expected = json.loads(cli.stdout.strip().splitlines()[-1])
    got = lowlat.bench(uri, calls=500, warmup=50)
    assert set(got) == set(expected)
    assert got["kind"] == "rpc" and got["transport"] == scheme and got["proc"] == "null"
    assert got["calls"] == 500 and got["threads"] == 1 and got["errors"] == 0
    assert 0 < got["p50_ns"] <= got["p99_ns"] <= got["max_ns"]
    assert got["calls_per_s"] > 0


def test_bench_of_other_procedures_and_threads(lab_server):
    got = lowlat.bench(lab_server["shm"], proc="ECHO", calls=400, size=1024, threads=2, spin="forever")
    assert (got["proc"], got["size"], got["threads"], got["spin"]) == ("echo", 1024, 2, "forever")
    assert got["mbit_s"] > 0
    with pytest.raises(ValueError, match="unknown lab procedure \"nope\""):
        lowlat.bench(lab_server["udp"], proc="nope")
    with pytest.raises(ValueError, match="spin"):
        lowlat.bench(lab_server["udp"], spin="sometimes")


def test_bench_releases_the_gil(lab_server):
    """Other Python threads run while a benchmark runs."""
    ticks = []
    running = True

    def tick() -> None:
        while running:
            ticks.append(time.monotonic())
            time.sleep(0.002)

    t = threading.Thread(target=tick, daemon=True)
    t.start()
    try:
        began = time.monotonic()
        lowlat.bench(lab_server["udp"], calls=20_000, warmup=100)
        ended = time.monotonic()
    finally:
        running = False
        t.join(timeout=5)
    inside = [x for x in ticks if began < x < ended]
    assert ended - began > 0.05, "the benchmark was too short to tell"
    assert len(inside) >= 5, f"{len(inside)} ticks in {ended - began:.3f} s of benchmark"


def test_bench_against_no_server(tmp_path):
    with pytest.raises(lowlat.ServerNotRunningError):
        lowlat.bench(f"shm://{tmp_path}/nobody.sock", calls=10)


def minimal_results() -> dict:
    """The smallest results.json lowlat's model accepts (docs/results.schema.json)."""
    return {
        "format_version": 1,
        "machine": {"cpu_model": "test CPU", "cores": 2, "kernel": "6.1", "date": "2026-11-25T10:00:00Z"},
        "quick": True,
        "ladder": [
            {
                "transport": "udp",
                "size": 32,
                "raw": {"p50_ns": 4600.0, "p99_ns": 7000.0},
                "rpc": {"p50_ns": 5900.0, "p99_ns": 9400.0},
                "ratio_p50": 1.28,
                "diff_p50_ns": 1300.0,
            }
        ],
        "busy_server": {"workload": "none", "rows": []},
        "threads": [],
        "load": [],
        "cold": [],
        "peers": [],
        "accounting": [],
        "cdf": [],
        "size_sweep": [],
    }


def test_load_results(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(minimal_results()))
    r = lowlat.load_results(path)
    assert r["machine"]["cores"] == 2 and r["quick"] is True
    assert r["ladder"][0]["rpc"] == {"p50_ns": 5900.0, "p99_ns": 9400.0}

    wrong = minimal_results() | {"format_version": 99}
    path.write_text(json.dumps(wrong))
    with pytest.raises(ValueError, match="results.json has format version 99; this build reads version 1"):
        lowlat.load_results(path)
    extra = minimal_results() | {"surprise": 1}
    path.write_text(json.dumps(extra))
    with pytest.raises(ValueError, match="unknown field `surprise`"):
        lowlat.load_results(str(path))
    path.write_text("{not json")
    with pytest.raises(ValueError, match="results.json is not valid"):
        lowlat.load_results(path)
    with pytest.raises(FileNotFoundError, match="missing.json"):
        lowlat.load_results(tmp_path / "missing.json")
