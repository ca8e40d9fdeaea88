import hashlib
import subprocess
import time
from pathlib import Path

import pytest

import gen

SCRIPT = "/app/bin/overlaps.py"
SHA = "95688978419a912e8a20ea8fae78e775c6aae9d9bbf131c7a29647d0afd1c0ca"


def run(tmp_path, text, timeout):
    p = tmp_path / "in.csv"
    p.write_text(text)
    t0 = time.monotonic()
    try:
        res = subprocess.run(["python3", SCRIPT, str(p)], capture_output=True, text=True, timeout=timeout, cwd="/tmp")
    except subprocess.TimeoutExpired:
        return None, timeout
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout, time.monotonic() - t0


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    # fail fast: a program that cannot do 3,000 bookings in 3 s will not do 100,000 in 12 s
    warm = gen.generate(2024, 3_000)
    out, _ = run(tmp_path_factory.mktemp("warm"), warm, timeout=3)
    if out is None:
        return None, None, 12
    text = gen.generate(2025, 100_000)
    out, secs = run(tmp_path_factory.mktemp("big"), text, timeout=12)
    return text, out, secs


def test_small_inputs_identical(tmp_path):
    for seed in (3, 4):
        text = gen.generate(seed, 200, rooms=4, horizon=1500)
        out, _ = run(tmp_path, text, timeout=60)
        assert out == gen.reference(text)


def test_edge_cases(tmp_path):
    text = ("id,room,start,end\n1,z,0,10\n2,z,10,20\n3,z,10,20\n4,z,10,20\n5,y,7,8\n6,a,0,100\n7,a,50,60\n"
            "8,a,55,56\n9,a,100,101\n")
    out, _ = run(tmp_path, text, timeout=60)
    assert out == gen.reference(text)
    assert out.splitlines()[1:] == ["a,3,10,3", "y,1,0,0", "z,3,10,3"]


def test_big_input_fast(big):
    _, out, secs = big
    assert out is not None, "did not finish within 12 s"
    assert secs < 12


def test_big_input_identical(big):
    text, out, _ = big
    assert out is not None, "did not finish"
    assert out == gen.reference(text)


def test_report_csv():
    data = Path("/app/data/bookings.csv").read_text()
    assert hashlib.sha256(data.encode()).hexdigest() == SHA, "bookings.csv was modified"
    assert Path("/app/report.csv").read_text() == gen.reference(data)
