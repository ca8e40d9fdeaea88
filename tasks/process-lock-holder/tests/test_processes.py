import fcntl
import json
import os
import time
from pathlib import Path

STATE = json.loads(Path(os.environ["T1_PRIVATE"], "procs.json").read_text())
TICKER_PID = Path("/app/run/ticker.pid")
TICKER_LOG = Path("/app/run/ticker.log")


def alive(pid):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def cmdline(pid):
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def ticker_pid():
    pid = int(TICKER_PID.read_text().strip())
    assert alive(pid), f"ticker pid {pid} is not running"
    assert "ticker.py" in cmdline(pid)
    return pid


def bystanders_alive():
    """The keeper and the other two workers must survive: killing every process is not finding the holder."""
    for pid in [STATE["keeper"], *STATE["others"]]:
        assert alive(pid), f"{pid} ({cmdline(pid) if alive(pid) else 'gone'}) was killed"


def test_lock_holder_killed():
    assert not alive(STATE["holder"])
    bystanders_alive()


def test_helpers_killed_and_lock_released():
    assert len(STATE["children"]) == 2, "setup did not record the helpers"
    for pid in STATE["children"]:
        assert not alive(pid), f"helper {pid} still running"
    fd = os.open("/app/run/data.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if still held
    finally:
        os.close(fd)
    bystanders_alive()


def test_bystanders_untouched():
    assert not alive(STATE["holder"]), "the lock holder is still running"
    bystanders_alive()
    hb = float(Path("/app/run/keeper.hb").read_text())
    assert time.time() - hb < 15  # it beats every 0.5 s; generous for a loaded machine


def test_killed_txt_names_parent():
    assert Path("/app/killed.txt").read_text().strip() == str(STATE["holder"])


def test_ticker_running_from_pidfile():
    ticker_pid()


def test_ticker_survives_hangup():
    pid = ticker_pid()
    status = Path(f"/proc/{pid}/status").read_text()
    sigign = int(next(l for l in status.splitlines() if l.startswith("SigIgn:")).split()[1], 16)
    own_session = os.getsid(pid) == pid
    ignores_hup = bool(sigign & (1 << (1 - 1)))  # SIGHUP = 1
    assert own_session or ignores_hup, "ticker would die with the shell's SIGHUP"


def test_ticker_interval_and_log():
    pid = ticker_pid()
    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert b"TICK_INTERVAL=0.2" in env
    before = TICKER_LOG.read_text().splitlines()
    time.sleep(3.0)
    after = TICKER_LOG.read_text().splitlines()
    assert after[: len(before)] == before, "log was truncated, not appended"
    new = after[len(before):]
    # 0.2 s gives ~15 ticks in 3 s, the default 1 s interval at most 4: the margin absorbs a loaded machine
    assert len(new) >= 6, f"only {len(new)} ticks in 3 s"
    assert all(l.startswith("tick ") for l in new)
