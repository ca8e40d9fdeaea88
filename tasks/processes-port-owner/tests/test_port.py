import json
import os
import socket
from pathlib import Path

PIDS = json.loads(Path(os.environ["T1_PRIVATE"], "listeners.json").read_text())


def alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_report():
    assert Path("/app/port-owner.txt").read_text() == f"{PIDS['gamma']}\n/app/svc/gamma.py\n"


def test_owner_stopped_and_port_free():
    assert not alive(PIDS["gamma"])
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 9417))
    finally:
        s.close()


def test_others_running():
    assert not alive(PIDS["gamma"]), "the owner is still running"
    for name in ("alpha", "beta", "delta"):
        assert alive(PIDS[name]), f"{name} was stopped"
