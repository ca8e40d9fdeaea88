"""A short soak (``bench/soak.py`` with a small budget) leaks nothing: processes, zombies, cgroups, temp dirs,
containers, volumes, fds, threads.

The script runs in a process of its own, as a user's training loop would, and reports what it holds before
and after (:mod:`t1env.leaks`); these tests assert that every count is back where it started once every env
is closed, and that nothing the run made outlives it.

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

from t1env import leaks

ROOT = Path(__file__).resolve().parents[2]
SOAK = ROOT / "bench" / "soak.py"


def _soak(tmp_root: Path, out: Path, backend: str, episodes: int, envs: int) -> tuple[dict, int]:
    env = {**os.environ, "TMPDIR": str(tmp_root)}
    proc = subprocess.Popen(
        [sys.executable, str(SOAK), "--backend", backend, "--episodes", str(episodes), "--envs", str(envs),
         "--seed", "1", "--huge-mb", "20", "--tasks", "6", "--json", str(out), "--quiet"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
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
    report, _ = _soak(sandbox_tmpdir, tmp_path / "soak.json", "local", episodes=100, envs=4)
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
    report, pid = _soak(sandbox_tmpdir, tmp_path / "soak.json", "docker", episodes=40, envs=4)
    _assert_nothing_leaked(report)
    assert report["leaks"]["containers"] == 0 and report["leaks"]["volumes"] == 0
    assert report["after"]["volumes"] == 0  # every volume its containers used is gone
    owners = [c["Labels"].get(LABEL_OWNER, "") for c in client().api.containers(all=True, filters={"label": LABEL_OWNER})]
    assert not [o for o in owners if o.split(":")[-2:-1] == [str(pid)]]  # and no container outlived the process


def test_snapshot_counts_this_process():
    """The counts are this process's: a child and a zombie child show up, and go when reaped."""
    before = leaks.snapshot()
    child = subprocess.Popen(["sleep", "30"])
    try:
        during = leaks.snapshot()
        assert during.processes == before.processes + 1
        child.kill()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped: a zombie of ours
        zombie = leaks.snapshot()
        assert zombie.zombies == before.zombies + 1
    finally:
        child.kill()
        child.wait()
    assert leaks.snapshot().leaks(before) == {k: 0 for k in before.leaks(before)}
