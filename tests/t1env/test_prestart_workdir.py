"""The pre-started sandbox of a one-task env comes with the task's workdir ready (files copied, ``setup.sh`` run,
before its shell exists), so that reset only hands it over; a sandbox prepared for one task never serves another."""

import os
import shutil
import tempfile
from pathlib import Path

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


@pytest.fixture
def own_tempdir():
    """A temp folder of the test's own for the local sandboxes' episode folders (searchable by the sandbox's uid)."""
    d = tempfile.mkdtemp(prefix="t1-test-episodes-")
    os.chmod(d, 0o711)
    old, tempfile.tempdir = tempfile.tempdir, d
    try:
        yield Path(d)
    finally:
        tempfile.tempdir = old
        shutil.rmtree(d, ignore_errors=True)


def _processes_naming(text: str) -> list[str]:
    found = []
    for f in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            line = f.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # ended meanwhile
        if text in line:
            found.append(line)
    return found


@pytest.mark.needs_bwrap
@pytest.mark.parametrize("task", ["hello-file", "several"])
def test_close_right_after_reset_leaves_nothing_while_the_spare_prepares(make_task, own_tempdir, task):
    """The spare's verifier is prepared on the worker after the spare is handed out; close() stops the spare on the
    worker too, after that preparation: no sandbox folder and no process of either sandbox is left."""
    kw = {"task": "hello-file"} if task == "hello-file" else {"tasks": ["hello-file", str(make_task())]}
    env = TerminalEnv(**kw, backend="local", prepare_verifier=True)
    env.reset(seed=0, options={"task": "hello-file"})
    env.close()
    assert list(own_tempdir.iterdir()) == []
    assert _processes_naming(str(own_tempdir)) == []
