import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SUP = "/app/bin/supervise"


def alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_for(cond, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


@pytest.fixture
def sup(tmp_path):
    assert os.access(SUP, os.X_OK), "supervise missing or not executable"
    procs = []

    def start(*cmd, env=None):
        pidfile, logfile = tmp_path / "s.pid", tmp_path / "s.log"
        p = subprocess.Popen([SUP, str(pidfile), str(logfile), "--", *cmd], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})},
                             start_new_session=True)
        procs.append(p)
        return p, pidfile, logfile

    yield start
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_pidfiles_and_env(sup, tmp_path):
    out = tmp_path / "env.txt"
    p, pidfile, _ = sup("sh", "-c", f'echo "$MARK $$" >> {out}; sleep 30', env={"MARK": "xyz"})
    assert wait_for(lambda: out.exists() and Path(str(pidfile) + ".child").exists(), 5)
    assert pidfile.read_text().strip() == str(p.pid)
    child = int(Path(str(pidfile) + ".child").read_text())
    assert out.read_text() == f"xyz {child}\n"
    assert alive(child)


def test_restart_and_exit_status_logged(sup, tmp_path):
    p, pidfile, log = sup("sh", "-c", "exit 7")
    assert wait_for(lambda: log.exists() and log.read_text().count("exit 7") >= 3, 6)
    assert set(log.read_text().splitlines()) == {"exit 7"}


def test_backoff_timing(sup, tmp_path):
    stamps = tmp_path / "t.txt"
    p, _, _ = sup(sys.executable, "-c", f"import time; open('{stamps}', 'a').write(f'{{time.monotonic()}}\\n')")
    assert wait_for(lambda: stamps.exists() and len(stamps.read_text().split()) >= 4, 8)
    t = [float(x) for x in stamps.read_text().split()][:4]
    gaps = [b - a for a, b in zip(t, t[1:])]
    for got, want in zip(gaps, [0.5, 1.0, 2.0]):
        assert want - 0.05 <= got <= want + 0.6, gaps


def test_sigterm_stops_child_and_cleans_up(sup, tmp_path):
    p, pidfile, log = sup("sleep", "60")
    assert wait_for(lambda: Path(str(pidfile) + ".child").exists(), 5)
    child = int(Path(str(pidfile) + ".child").read_text())
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 0
    assert not alive(child)
    assert log.read_text().splitlines()[-1] == "stopped"
    assert not pidfile.exists() and not Path(str(pidfile) + ".child").exists()


def test_daemon_running_flaky():
    pid = int(Path("/app/run/flaky.pid").read_text())
    assert alive(pid)
    assert os.getsid(pid) == pid, "supervisor is not in its own session"
    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert b"FLAKY_LIFETIME=1" in env
    assert Path("/app/run/flaky.log").read_text().count("start ") >= 2, "flaky.py was not restarted"
    assert "exit 3" in Path("/app/run/supervise.log").read_text()
