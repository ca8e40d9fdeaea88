"""A short soak (``bench/soak.py`` with a small budget) leaks nothing: processes, zombies, cgroups, temp dirs,
containers, volumes, fds, threads.

The script runs in a process of its own, as a user's training loop would, and reports what it holds before
and after (:mod:`t1env.tools.leaks`); these tests assert that, once every env is closed, it holds nothing it did not
hold before, and that nothing the run made outlives it.

Zombies: the pid 1 of some hosts (containers, this CI machine) reaps orphans late or never, so the zombie of a
process reparented to it may linger machine-wide for a while whoever made it. Only zombies in the driver's own
tree are its to reap, so only those count (``zombies``); the machine-wide number is in the report as context.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from t1env.tools import leaks

ROOT = Path(__file__).resolve().parents[2]
SOAK = ROOT / "bench" / "soak.py"


def _soak(tmp_root: Path, out: Path, backend: str, episodes: int, envs: int) -> tuple[dict, int]:
    env = {**os.environ, "TMPDIR": str(tmp_root)}
    proc = subprocess.Popen(
        [
            sys.executable,
            str(SOAK),
            "--backend",
            backend,
            "--episodes",
            str(episodes),
            "--envs",
            str(envs),
            "--seed",
            "1",
            "--huge-mb",
            "20",
            "--tasks",
            "6",
            "--json",
            str(out),
            "--quiet",
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, err = proc.communicate(timeout=600)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.read_text()), proc.pid


def _assert_nothing_leaked(report: dict) -> None:
    assert report["errors"] == [], report["errors"][0]
    assert sum(report["endings"].values()) == report["args"]["episodes"]
    assert report["max_observation"] <= report["observation_cap"]
    leaked = {kind: n for kind, n in report["leaks"].items() if n > 0}
    assert leaked == {}, f"leaked {leaked}; before {report['before']}, after {report['after']}"
    if os.geteuid() == 0 and not Path("/sys/fs/cgroup/cgroup.controllers").exists():  # cgroup v1 as root
        assert report["isolated"], "the soak could not run in cgroups of its own: cgroup counts not attributable"
        assert "cgroups" in report["leaks"] and "cgroup_processes" in report["leaks"]


@pytest.mark.slow
def test_local_soak_leaks_nothing(sandbox_tmpdir, tmp_path):
    report, _ = _soak(sandbox_tmpdir, tmp_path / "soak.json", "local", episodes=60, envs=4)
    _assert_nothing_leaked(report)
    assert list(sandbox_tmpdir.iterdir()) == []  # the run's temp folder (episode folders inside) is gone


@pytest.mark.slow
@pytest.mark.docker
def test_docker_soak_leaks_nothing(sandbox_tmpdir, tmp_path):
    pytest.importorskip("docker", reason="the docker SDK is not installed: pip install 't1[docker]'")
    from t1env.sandbox.docker_engine import DEFAULT_BASE, LABEL_OWNER, client, engine_ready

    ready, why = engine_ready(DEFAULT_BASE)
    if not ready:
        pytest.skip(why)
    report, pid = _soak(sandbox_tmpdir, tmp_path / "soak.json", "docker", episodes=24, envs=4)
    _assert_nothing_leaked(report)
    assert report["leaks"]["containers"] == 0 and report["leaks"]["volumes"] == 0
    assert report["after"]["volumes"] == 0  # every volume its containers used is gone
    owners = [
        c["Labels"].get(LABEL_OWNER, "") for c in client().api.containers(all=True, filters={"label": LABEL_OWNER})
    ]
    assert not [o for o in owners if o.split(":")[-2:-1] == [str(pid)]]  # and no container outlived the process


# Run in a fresh interpreter: the counts are the whole process's, and in the test process the threads of earlier
# tests (reapers, pools, servers) open, close and reap things while the test looks (one closed an fd between two
# snapshots and a total counted `fds: -1`). Only what the script itself does happens there.
SNAPSHOTS = r"""
import json, os, subprocess, threading
from t1env.tools import leaks

out = {}
spare = os.open("/dev/null", os.O_RDONLY)
before = leaks.snapshot()
child = subprocess.Popen(["sleep", "30"])
out["child"] = leaks.snapshot().leaks(before)
child.kill()
os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped: a zombie of ours
out["zombie"] = leaks.snapshot().leaks(before)
child.wait()
closer = threading.Thread(target=os.close, args=(spare,))  # another thread releases an fd held before
closer.start()
closer.join()
out["released"] = leaks.snapshot().leaks(before)
r, w = os.pipe()
stop = threading.Event()
alive = threading.Thread(target=stop.wait)
alive.start()
out["opened"] = leaks.snapshot().leaks(before)
stop.set()
alive.join()
os.close(r)
os.close(w)
out["after"] = leaks.snapshot().leaks(before)
print(json.dumps(out))
"""
# cgroups are counted below this process's cgroups, which other programs may share (cgroup v1 without
# own_cgroups(): the hierarchy's root): not this script's alone, so not asserted here (the soak isolates itself)
OWN = ("processes", "zombies", "temp_dirs", "fds", "threads")


def test_snapshot_counts_what_this_process_made_and_still_holds():
    """A child and a zombie child count, and stop counting once reaped; an fd another thread closes is released,
    not a negative leak; an fd pair and a thread made since count until they are closed and joined."""
    run = subprocess.run(
        [sys.executable, "-c", SNAPSHOTS], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen = {phase: {k: n for k, n in counts.items() if k in OWN} for phase, counts in json.loads(run.stdout).items()}
    nothing = dict.fromkeys(OWN, 0)
    assert seen["child"] == {**nothing, "processes": 1}
    assert seen["zombie"] == {**nothing, "processes": 1, "zombies": 1}
    assert seen["released"] == nothing
    assert seen["opened"] == {**nothing, "fds": 2, "threads": 1}
    assert seen["after"] == nothing


def test_a_leak_is_what_is_held_now_and_was_not_before():
    """Set difference, not a count difference: one released thing cannot hide one leaked thing."""

    def snap(**held) -> leaks.Snapshot:
        counts = {k: len(held[k]) if k in held else None for k in leaks.Snapshot.LEAK_KINDS}
        return leaks.Snapshot(
            **counts,
            docker_pooled_fds=None,
            rss_mb=0.0,
            machine_processes=0,
            machine_zombies=0,
            held={k: frozenset(v) for k, v in held.items()},
        )

    before = snap(fds={(3, "pipe:[1]"), (4, "/dev/null")}, threads={100})
    after = snap(fds={(3, "pipe:[1]"), (4, "socket:[9]")}, threads={100})  # fd 4 closed, then reused for a socket
    assert after.leaks(before) == {"fds": 1, "threads": 0}
    assert before.leaks(after) == {"fds": 1, "threads": 0}
    assert "held" not in after.as_dict() and after.as_dict()["fds"] == 2  # the counts; fds 2 -> 2, yet one leaked
