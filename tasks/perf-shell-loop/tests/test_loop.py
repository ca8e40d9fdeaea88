import hashlib
import subprocess
import time
from pathlib import Path

import gen

SHA = "bb805b52c836733ab17afbef68212e67658a2d8ab318b563269980f590ebc09a"


def run(path, timeout):
    t0 = time.monotonic()
    try:
        res = subprocess.run(["bash", "/app/summarize.sh", str(path)], capture_output=True, text=True, timeout=timeout,
                             cwd="/tmp")
    except subprocess.TimeoutExpired:
        return None, timeout
    assert res.returncode == 0, res.stderr[-1000:]
    return res.stdout, time.monotonic() - t0


def test_small_log_identical(tmp_path):
    text = gen.generate(5, 40) + "2024-05-01 zz99 GET 599 7\n2024-05-01 a-1 GET 200 3\n"
    p = tmp_path / "s.log"
    p.write_text(text)
    out, _ = run(p, 60)
    assert out == gen.reference(text)


def test_summary_txt():
    text = Path("/app/data/requests.log").read_text()
    assert hashlib.sha256(text.encode()).hexdigest() == SHA, "requests.log was modified"
    assert Path("/app/summary.txt").read_text() == gen.reference(text)


def test_big_log_fast(tmp_path):
    text = gen.generate(9, 100_000)
    p = tmp_path / "b.log"
    p.write_text(text)
    out, secs = run(p, 8)
    assert out is not None, "took longer than 8 s"
    assert out == gen.reference(text)
