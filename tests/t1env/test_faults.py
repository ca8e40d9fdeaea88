"""Faults in the middle of an episode, on each backend where they apply.

Every test injects one fault from outside the agent's control, asserts what the user sees (the
observation, ``info``: ``error``, ``end_reason``, ``verifier_error``, ``exit_code``) and then plays a
whole next episode in the same env: ``reset()``, a command, ``submit``, full marks.

A Ray worker killed mid-episode is covered by
``tests/t1env/test_ray_executor.py::test_a_worker_killed_mid_episode_is_replaced_and_the_episode_retried``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from t1env.env import TerminalEnv


def _docker_ready() -> tuple[bool, str]:
    try:
        from t1env.sandbox import docker as D
    except ImportError:
        return False, "the docker SDK is not installed: pip install 't1[docker]'"
    return D.engine_ready(D.DEFAULT_BASE)


_DOCKER_UP, _DOCKER_WHY = _docker_ready()
_docker = [pytest.mark.docker, pytest.mark.skipif(not _DOCKER_UP, reason=_DOCKER_WHY)]
ROOT = Path(__file__).resolve().parents[2]
BACKENDS = [pytest.param("local", id="local"), pytest.param("docker", id="docker", marks=_docker)]


def _next_episode_works(env: TerminalEnv) -> None:
    """A whole episode after the fault: reset, a command, submit; the default task's 3 checks pass."""
    obs, info = env.reset(seed=1)
    assert "hello" in obs
    obs, _, _, truncated, info = env.step("echo hello > /app/out.txt && cat /app/out.txt")
    assert obs == "hello\n" and info["exit_code"] == 0 and not truncated
    _, reward, terminated, _, info = env.step({"submit": True})
    assert terminated and info["verifier_error"] is None
    assert (reward, info["passed"], info["total"]) == (3.0, 3, 3)


# -- the sandbox killed from outside ------------------------------------------------------------


def _kill_sandbox_from_outside(env: TerminalEnv, backend: str) -> None:
    box = env.unwrapped.sandbox
    if backend == "docker":
        subprocess.run(["docker", "kill", box.container_id], check=True, capture_output=True, timeout=60)
    else:
        os.kill(box._init.pid, signal.SIGKILL)  # the bwrap process: pid 1 of the sandbox's namespaces


@pytest.mark.parametrize("backend", BACKENDS)
def test_sandbox_killed_during_a_command_ends_the_episode_with_the_reason(backend, make_task):
    """`docker kill` / SIGKILL to bwrap while a command runs: the step returns at once (not after the
    command's timeout) with the reason, and the next episode works."""
    env = TerminalEnv(task=str(make_task()), backend=backend)
    try:
        env.reset(seed=0)
        killer = threading.Timer(1.0, _kill_sandbox_from_outside, (env, backend))
        killer.start()
        t0 = time.monotonic()
        obs, reward, terminated, truncated, info = env.step({"command": "sleep 60", "timeout": 60})
        killer.join()
        assert time.monotonic() - t0 < 30
        assert truncated and not terminated and reward == 0.0
        assert info["end_reason"] == "sandbox_error" and info["error"].startswith("sandbox failure: ")
        why = {
            "docker": r"the sandbox is gone: container \w{12} exited \(code 137\)$",
            "local": r"sandbox is not running \(it was stopped or its init process died\)$",
        }[backend]
        assert re.search(why, info["error"]), info["error"]
        assert obs.startswith("[t1] the sandbox failed and the episode was ended")
        assert info["passed"] == 0 and info["total"] == 3
        _next_episode_works(env)
    finally:
        env.close()


# -- the Docker engine restarted ----------------------------------------------------------------


def _engine_up() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode == 0


def _restart_dockerd() -> None:
    """Stop dockerd (SIGTERM, as a service manager does) and start it again the way `.ci/docker-setup.sh` does
    (which also waits until the engine answers)."""
    pids = subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, text=True).stdout.split()
    assert len(pids) == 1, f"expected one dockerd, found {pids}"
    pid = int(pids[0])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while _proc_start(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _proc_start(pid) is None, "dockerd did not stop within 60 s"
    subprocess.run([str(ROOT / ".ci" / "docker-setup.sh")], check=True, capture_output=True, timeout=120)


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.skipif(not _DOCKER_UP, reason=_DOCKER_WHY)
@pytest.mark.skipif(os.geteuid() != 0, reason="restarting dockerd needs root")
def test_docker_engine_restarted_mid_episode(make_task):
    """dockerd restarted between two steps (its containers stop with it: no live-restore): the next step ends
    the episode with the container's fate; the next episode runs on a new container and is judged."""
    from t1env.sandbox import docker as D

    if D.client().info().get("LiveRestoreEnabled"):
        pytest.skip("this engine keeps containers running across its restarts (live-restore)")
    env = TerminalEnv(task=str(make_task()), backend="docker")
    try:
        env.reset(seed=0)
        assert env.step("echo before > /app/out.txt")[4]["exit_code"] == 0
        try:
            _restart_dockerd()
            obs, reward, terminated, truncated, info = env.step("cat /app/out.txt")
            assert truncated and not terminated and reward == 0.0 and info["end_reason"] == "sandbox_error"
            assert re.search(r"the sandbox is gone: container \w{12} exited \(code \d+\)", info["error"]), info
            assert obs.startswith("[t1] the sandbox failed and the episode was ended")
            _next_episode_works(env)
        finally:
            if not _engine_up():
                subprocess.run([str(ROOT / ".ci" / "docker-setup.sh")], check=False, timeout=180)
    finally:
        env.close()


# -- the memory limit ---------------------------------------------------------------------------

_HOG = "python3 -c 'b = bytearray(400 * 2**20); print(\"allocated\")'"


@pytest.mark.parametrize("backend", BACKENDS)
def test_command_over_the_memory_limit_is_killed_and_the_shell_lives_on(backend, make_task):
    """A task with `memory_mb = 64`; a command allocates 400 MiB. The out-of-memory killer ends it (exit 137)
    and the observation says so (bash alone says "Killed", as for any kill -9); the shell, the verifier (under
    the same limit) and the next episode work."""
    task = make_task(toml_extra="[environment]\nmemory_mb = 64\n")
    env = TerminalEnv(task=str(task), backend=backend)
    try:
        _, info = env.reset(seed=0)
        if not info["limits"]["memory"]:
            pytest.skip("no memory cgroup for the local sandbox on this host (limits['memory'] is False)")
        obs, _, _, truncated, info = env.step(_HOG)
        assert "allocated" not in obs and not truncated
        assert info["exit_code"] == 137 and info["oom_killed"], (obs, info)
        assert obs.endswith(
            "[t1] the out-of-memory killer ended a process: the sandbox's memory limit (64 MiB) was reached\n"
        ), obs
        obs, _, _, _, info = env.step("sh -c 'kill -9 $$'")  # a SIGKILL that is not the memory limit's
        assert info["exit_code"] == 137 and not info["oom_killed"] and "[t1]" not in obs
        obs, _, _, _, info = env.step("echo still here")
        assert obs == "still here\n" and not info["shell_restarted"] and not info["oom_killed"]
        _, reward, terminated, _, info = env.step({"submit": True})
        assert terminated and info["verifier_error"] is None and info["total"] == 3
        _next_episode_works(env)
    finally:
        env.close()


# -- the verifier's timeout ---------------------------------------------------------------------

_HANGING_CHECK = {
    "test_out.py": """
        import subprocess, time
        from pathlib import Path

        def test_content():
            assert Path("/app/out.txt").read_text() == "hello\\n"

        def test_not_hanging():
            if Path("/app/hang").exists():  # a child that holds the report's pipes, then sleep
                subprocess.Popen(["sleep", "600"])
                time.sleep(600)

        def test_single_line():
            assert Path("/app/out.txt").read_text().count("\\n") == 1
    """
}


# A Docker verifier container takes 2-4 s to start and run the checks on a loaded 2-core machine.
_VERIFIER_TIMEOUT = {"local": 4, "docker": 12}


@pytest.mark.parametrize("backend", BACKENDS)
def test_verifier_killed_by_its_timeout_gives_no_credit(backend, make_task):
    """A check that hangs (with a child holding the report's pipes): the verifier is killed at its timeout, the
    checks that did not finish fail, info says why; the next episode's checks run and pass."""
    timeout = _VERIFIER_TIMEOUT[backend]
    env = TerminalEnv(task=str(make_task(tests=_HANGING_CHECK)), backend=backend, verifier_timeout=timeout)
    try:
        env.reset(seed=0)
        env.step("touch /app/hang")
        t0 = time.monotonic()
        obs, reward, terminated, _, info = env.step({"submit": True})
        assert time.monotonic() - t0 < timeout + 20
        assert terminated and info["verifier_error"] == f"verifier timed out after {timeout}s"
        assert (reward, info["passed"], info["total"], info["resolved"]) == (0.0, 0, 3, False)
        outcomes = {c["name"].rsplit("::", 1)[-1]: c["outcome"] for c in info["checks"]}
        assert outcomes == {"test_content": "failed", "test_not_hanging": "not run", "test_single_line": "not run"}
        assert obs == "[t1] episode ended (submitted): 0/3 checks passed"
        _next_episode_works(env)  # no /app/hang: the checks run and pass
    finally:
        env.close()


# -- the disk full ------------------------------------------------------------------------------


@pytest.fixture
def tiny_tmpfs(tmp_path_factory):
    """A 16 MiB tmpfs for the local sandbox's episode folders (``tempfile.tempdir``)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    tmp_path_factory.getbasetemp()  # pytest's session temp folder goes in the real temp folder, not on the tmpfs
    mnt = Path(tempfile.mkdtemp(prefix="t1-test-tmpfs-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0711", "t1-test", str(mnt)], check=True)
    old = tempfile.tempdir
    tempfile.tempdir = str(mnt)
    try:
        yield mnt
    finally:
        tempfile.tempdir = old
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        mnt.rmdir()


@pytest.mark.parametrize("prepared", [False, True], ids=["cold-verifier", "prepared-verifier"])
def test_disk_full_in_the_workdir_is_reported_and_the_next_episode_has_room(make_task, tiny_tmpfs, prepared):
    """The local backend has no disk quota (docs/sandbox.md): the file system of the episode folders fills up.
    The command's error says so, and the next episode starts with the space the last one used freed (it is stopped
    in the background). A verifier started at submission says why it could not run (it is staged into the episode
    folder); a prepared one was staged before the disk filled, and scores what the agent left: an empty
    ``out.txt`` (the shell made it, the write failed), 1 of 3. Docker has no such limit to hit: the workdir is a
    volume on the engine's disk (docs/sandbox.md)."""
    env = TerminalEnv(task=str(make_task()), backend="local", prepare_verifier=prepared)
    try:
        env.reset(seed=0)
        obs, _, _, truncated, info = env.step("head -c 64M /dev/zero > /app/big")
        assert "No space left on device" in obs and info["exit_code"] == 1 and not truncated
        obs, _, _, _, info = env.step("echo hello > /app/out.txt")
        assert "No space left on device" in obs and info["exit_code"] == 1
        _, reward, terminated, _, info = env.step({"submit": True})
        assert terminated and info["verifier_prepared"] is prepared
        if prepared:
            assert info["verifier_error"] is None and (reward, info["passed"], info["total"]) == (1.0, 1, 3)
            assert [c["name"] for c in info["checks"] if c["passed"]] == ["test_out.py::test_exists"]
        else:
            assert (reward, info["passed"], info["total"]) == (0.0, 0, 3)
            assert info["verifier_error"].startswith("verifier could not run: staging the verifier")
            assert "No space left on device" in info["verifier_error"]
        _next_episode_works(env)
    finally:
        env.close()


# -- the driving process SIGKILLed, then `t1env gc` ---------------------------------------------


# Plays one episode per backend up to a command, waits for its background work (the next episode's sandbox, the
# verifier's preparation and the local verifier zygote, the Docker pool's spare container), says "ready" and waits; on
# a line from stdin it finishes the episodes.
_DRIVER = """
import json, sys
from t1env.env import TerminalEnv
from t1env.sandbox import docker_pool

task, backends = sys.argv[1], sys.argv[2].split(",")
envs = {b: TerminalEnv(task=task, backend=b) for b in backends}
for env in envs.values():
    env.reset(seed=0)
    env.step("echo hello > /app/out.txt")
    env._spare.result()
    env._wait_for_prepare()
    if env._zygotes is not None:
        env._zygotes.idle()  # the verifier zygote the local episode's preparation started is ready
for p in list(docker_pool._pools.values()):
    with p.cond:
        p.cond.wait_for(lambda: len(p.ready) >= p.size and not p.filling, timeout=120)
print("ready", flush=True)
sys.stdin.readline()
out = {}
for b, env in envs.items():
    obs = env.step("cat /app/out.txt")[0]
    _, reward, terminated, _, info = env.step({"submit": True})
    out[b] = [obs, reward, info["verifier_error"]]
    env.close()
print(json.dumps(out), flush=True)
"""


def _start_driver(task: Path, backends: str, tmpdir: Path) -> subprocess.Popen:
    p = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, str(task), backends],
        cwd=ROOT,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(tmpdir)},
    )
    line = p.stdout.readline()
    assert line == "ready\n", f"driver did not start: {line!r}"
    return p


def _proc_start(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _descendants(root: int) -> set[tuple[int, str]]:
    """(pid, start time) of every process below ``root``."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            rest = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(rest[1]), []).append(int(stat.parent.name))
    out, todo = set(), [root]
    while todo:
        for c in children.get(todo.pop(), []):
            start = _proc_start(c)
            if start is not None:
                out.add((c, start))
                todo.append(c)
    return out


def _leftovers(pid: int, tmpdir: Path) -> dict[str, set]:
    """What a driver process has on the host: processes, episode folders, cgroups, containers and volumes."""
    from t1env.sandbox import docker as D

    procs = _descendants(pid)
    cgroups = set()
    for p, _ in procs:
        try:
            lines = Path(f"/proc/{p}/cgroup").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            _, ctrls, path = line.split(":", 2)
            if "/t1-" in path:
                cgroups.update(Path("/sys/fs/cgroup") / c / path.lstrip("/") for c in ctrls.split(",") if c)
    folders = {d for d in tmpdir.glob("t1-sbx-*") if (d / "owner").read_text() == str(pid)}
    containers, volumes = set(), set()
    for c in D.client().api.containers(all=True, filters={"label": f"{D.LABEL}=1"}):
        if c["Labels"].get(D.LABEL_OWNER, "").split(":")[2:3] == [str(pid)]:
            containers.add(c["Id"])
            volumes.update(m["Name"] for m in c["Mounts"] if m["Type"] == "volume")
    return {"processes": procs, "folders": folders, "cgroups": cgroups, "containers": containers, "volumes": volumes}


def _still_there(left: dict[str, set]) -> dict[str, set]:
    from t1env.sandbox import docker as D

    api = D.client().api
    existing_containers = {c["Id"] for c in api.containers(all=True)}
    existing_volumes = {v["Name"] for v in api.volumes().get("Volumes") or []}
    return {
        "processes": {(p, s) for p, s in left["processes"] if _proc_start(p) == s},
        "folders": {d for d in left["folders"] if d.exists()},
        "cgroups": {d for d in left["cgroups"] if d.exists()},
        "containers": left["containers"] & existing_containers,
        "volumes": left["volumes"] & existing_volumes,
    }


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.skipif(not _DOCKER_UP, reason=_DOCKER_WHY)
def test_gc_removes_what_a_killed_driver_left_and_nothing_of_a_live_one(make_task, sandbox_tmpdir):
    """A driver with a local and a Docker episode running is SIGKILLed. What it left (sandbox processes, episode
    folders, cgroups, containers, volumes) is there until `t1env gc`, and gone after it; a second, live driver
    keeps all of its own, and its episodes go on and are judged."""
    task = make_task()
    dead = _start_driver(task, "local,docker", sandbox_tmpdir)
    live = _start_driver(task, "local,docker", sandbox_tmpdir)
    try:
        left, kept = _leftovers(dead.pid, sandbox_tmpdir), _leftovers(live.pid, sandbox_tmpdir)
        # local: the episode's sandbox, the prestarted next one and the verifier zygote, each a folder and cgroups
        # (v1: pids and memory); Docker: the same two containers and the pool's spare, each with 3 volumes
        assert len(left["folders"]) == 3 and len(left["cgroups"]) >= 3, left
        assert len(left["containers"]) >= 3 and len(left["volumes"]) >= 9, left
        dead.kill()
        dead.wait(timeout=30)
        before_gc = _still_there(left)
        assert before_gc["folders"] and before_gc["cgroups"] and before_gc["containers"] and before_gc["volumes"]

        gc = subprocess.run(
            [sys.executable, "-m", "t1env", "gc"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "TMPDIR": str(sandbox_tmpdir)},
        )
        assert gc.returncode == 0, gc.stderr
        assert "removed 3 orphaned local sandbox folder(s)" in gc.stdout, gc.stdout
        deadline = time.monotonic() + 10  # processes of removed containers exit after the engine ends them
        while _still_there(left)["processes"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _still_there(left) == {k: set() for k in left}
        assert _still_there(kept) == kept  # nothing of the live driver was touched

        live.stdin.write("finish\n")
        live.stdin.flush()
        result = json.loads(live.stdout.readline())
        assert result == {"local": ["hello\n", 3.0, None], "docker": ["hello\n", 3.0, None]}
        assert live.wait(timeout=120) == 0
    finally:
        for p in (dead, live):
            if p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run(
            [sys.executable, "-m", "t1env", "gc"],
            cwd=ROOT,
            capture_output=True,
            timeout=120,
            env={**os.environ, "TMPDIR": str(sandbox_tmpdir)},
        )  # what a failed run left
