import shutil
import subprocess
import time

import pytest

import gen
import reference


def timed(db, timeout=10):
    t0 = time.monotonic()
    try:
        res = subprocess.run(["python3", "/app/queries.py", str(db)], capture_output=True, text=True, timeout=timeout,
                             cwd="/tmp")
    except subprocess.TimeoutExpired:
        return None, timeout
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout, time.monotonic() - t0


SHIPPED_FINGERPRINT = (200000, 20000100000, 200079913, 342996161199863, 5004042919, 966291)


@pytest.fixture(scope="module")
def ref_shipped():
    assert reference.fingerprint("/app/app.db") == SHIPPED_FINGERPRINT, "app.db data was modified"
    return "/app/app.db"


@pytest.fixture(scope="module")
def want_shipped(ref_shipped):
    return reference.report(ref_shipped)


@pytest.fixture(scope="module")
def shipped_run(tmp_path_factory):
    # fail fast: a script that needs more than 3 s for 20,000 rows will not do 200,000 in 10 s
    small = tmp_path_factory.mktemp("s") / "small.db"
    gen.build(str(small), 3, n=20_000, users=2000)
    if timed(small, timeout=3)[0] is None:
        return None, 10
    return timed("/app/app.db")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory, shipped_run):
    if shipped_run[0] is None:  # fail fast: already too slow on the shipped database
        return None, 0, None
    p = tmp_path_factory.mktemp("f") / "fresh.db"
    gen.build(str(p), 7, n=150_000, users=3000)
    want = reference.report(p)
    out, secs = timed(p)
    return out, secs, want


def test_data_unchanged(want_shipped, shipped_run):
    # the data are intact *and* the script still reports on them: one line per user, as the reference
    out, _ = shipped_run
    assert out is not None, "did not finish"
    assert out.startswith("top users:\n") and len(out.splitlines()) == len(want_shipped.splitlines()), \
        "the script no longer prints the report"


def test_shipped_fast(shipped_run, want_shipped):
    # fast at producing the report, not at exiting: its first section must be the right one
    out, secs = shipped_run
    assert out is not None, "did not finish within 10 s"
    top = want_shipped.split("buyers ", 1)[0]
    assert out.startswith(top), "finished in time, but not with the report's top users"


def test_shipped_output(shipped_run, want_shipped):
    out, _ = shipped_run
    assert out is not None, "did not finish"
    assert out == want_shipped


def test_fresh_database_fast_and_identical(fresh):
    out, secs, want = fresh
    assert out is not None, "did not finish within 10 s on a fresh database"
    assert out == want
