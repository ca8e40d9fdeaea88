"""The pre-started sandbox of a one-task env comes with the task's workdir ready (files copied, ``setup.sh`` run,
before its shell exists), so that reset only hands it over; a sandbox prepared for one task never serves another."""

import os

import pytest

from t1env.env import TerminalEnv
from t1env.sandbox.docker import DEFAULT_BASE, engine_ready

_DOCKER_UP, _DOCKER_WHY = engine_ready(DEFAULT_BASE)
BACKENDS = [
    pytest.param("local", marks=pytest.mark.needs_bwrap),
    pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.skipif(not _DOCKER_UP, reason=_DOCKER_WHY)]),
]

# setup.sh records each run and the command lines of every process in the sandbox while it runs
SETUP = "echo run >> /app/setup-runs\nfor f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done > /app/procs\n"


def _take_spare(env: TerminalEnv):
    """Wait for the background start of the next episode's sandbox; return it."""
    box, _shell = env._spare.result()
    return box


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_prestarted_sandbox_has_the_files_and_setup_ran_once_before_any_shell(make_task, backend):
    d = make_task(env_files={"data/in.txt": "payload\n", "tool.sh": "echo tool\n", "setup.sh": SETUP})
    os.chmod(d / "environment" / "tool.sh", 0o750)
    env = TerminalEnv(task=str(d), backend=backend)
    try:
        env.reset(seed=0)
        spare = _take_spare(env)
        env.reset(seed=1)
        assert env.sandbox is spare  # the prepared spare served this episode
        obs, *_ = env.step("cat /app/setup-runs /app/data/in.txt; stat -c '%a %u' /app/tool.sh; /app/tool.sh")
        assert obs == "run\npayload\n750 0\ntool\n"
        procs = env.step("cat /app/procs")[0]
        assert ".t1-setup.sh" in procs and "--norc" not in procs  # setup ran; the agent's shell did not exist yet
        assert "setup.sh" not in env.step("ls -a /app /tmp")[0]
    finally:
        env.close()


def test_a_sandbox_prepared_for_one_task_does_not_serve_another(make_task, tmp_path):
    a = make_task("task-a", env_files={"a.txt": "from a\n"})
    b = make_task("task-b", env_files={"b.txt": "from b\n"}, root=tmp_path / "other")
    env = TerminalEnv(task=str(a))
    try:
        env.reset(seed=0)
        spare_a = _take_spare(env)
        env.reset(seed=1, options={"task": str(b)})
        assert env.sandbox is not spare_a and env.task.id == "task-b"
        assert env.step("ls /app")[0] == "b.txt\n"
        env.reset(seed=2)  # the spare started during b's episode was prepared for b: not for this one
        assert env.task.id == "task-a" and env.step("ls /app")[0] == "a.txt\n"
    finally:
        env.close()


def test_a_several_task_env_copies_the_files_at_reset(make_task, tmp_path):
    a = make_task("task-a", env_files={"a.txt": "from a\n"})
    b = make_task("task-b", env_files={"b.txt": "from b\n"}, root=tmp_path / "other")
    env = TerminalEnv(tasks=[str(a), str(b)])
    try:
        for seed, tid, listing in ((0, str(a), "a.txt\n"), (1, str(b), "b.txt\n"), (2, str(a), "a.txt\n")):
            env.reset(seed=seed, options={"task": tid})
            assert env.step("ls /app")[0] == listing
    finally:
        env.close()
