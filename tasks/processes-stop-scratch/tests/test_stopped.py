import json
import os
from pathlib import Path

STATE = json.loads(Path(os.environ["T1_PRIVATE"], "jobs.json").read_text())


def alive(pid):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_scratch_jobs_stopped():
    assert len(STATE["stop"]) == 3
    for pid in STATE["stop"]:
        assert not alive(pid), f"scratch job {pid} still running"


def test_other_jobs_running():
    assert any(not alive(p) for p in STATE["stop"]), "nothing was stopped"
    for pid in STATE["keep"]:
        assert alive(pid), f"job {pid} was killed but is not a scratch job"


def test_stopped_txt():
    assert Path("/app/stopped.txt").read_text() == "".join(f"{p}\n" for p in sorted(STATE["stop"]))
