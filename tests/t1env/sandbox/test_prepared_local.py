"""The local backend's prepared verifier (issue 27): started while the agent plays, out of its reach, and scoring
exactly what a verifier started at submission scores. One test per claim of ``t1env/sandbox/local_verifier.py``'s
"the prepared verifier"; the reward-integrity suite (tests/t1env/test_reward_integrity.py) plays every attack with
the env's default, a prepared verifier."""

import os
from pathlib import Path

import pytest

from t1env.agent.reference import oracle_command
from t1env.env import TerminalEnv
from t1env.episode.verify import prepare, runtime_bundle
from t1env.registry import get_task
from t1env.sandbox import make_sandbox
from t1env.sandbox.base import VerifierOptions

from .conftest import play, results

TASK = "hello-file"


@pytest.fixture(autouse=True)
def no_zygote(monkeypatch):
    """The prepared verifier is what an env uses where verifier zygotes are off (t1env/sandbox/local_zygote.py)."""
    monkeypatch.setenv("T1_VERIFIER_ZYGOTE", "0")


def episode(prepare_verifier: bool, commands: list[str]) -> dict:
    return play(TASK, commands, prepare_verifier=prepare_verifier)


def test_prepared_verifier_scores_what_a_cold_one_scores():
    """Oracle and no-op, each with the verifier prepared at reset and started at submission: the same check
    results, and ``info["verifier_prepared"]`` says which ran."""
    solve = [oracle_command(get_task(TASK))]
    for commands in (solve, []):
        warm, cold = episode(True, commands), episode(False, commands)
        assert (warm["verifier_prepared"], cold["verifier_prepared"]) == (True, False)
        assert warm["verifier_error"] is None and cold["verifier_error"] is None
        assert results(warm) == results(cold), (warm["checks"], cold["checks"])
    assert warm["passed"] < warm["total"]  # the no-op: the checks can fail, they are not both full marks


def _ns(pid: int, kind: str) -> str:
    return os.readlink(f"/proc/{pid}/ns/{kind}")


def test_agent_cannot_see_reach_or_starve_the_prepared_verifier():
    """While the prepared verifier waits, every process of it is in pid and mount namespaces and cgroups other than
    the agent's (the agent's pids and memory caps, which it can fill, are not the verifier's); the agent finds
    neither it nor the staged tests, and its kills by name reach nothing. The prepared verifier still runs at
    submission and scores the no-op's result."""
    noop = episode(False, [])
    env = TerminalEnv(task=TASK, prestart=False)
    try:
        env.reset(seed=0)
        env._wait_for_prepare()
        box = env.sandbox
        prepared = box._prepared
        assert prepared is not None and prepared.task is not None  # staged with the task's tests
        pids = prepared.cgroups.pids() or {prepared.proc.pid}
        for kind in ("pid", "mnt"):
            assert all(_ns(p, kind) != _ns(box.init_pid, kind) for p in pids), kind
        assert not set(prepared.cgroups.dirs) & set(box._cg.dirs) and not prepared.cgroups.pids() & box._cg.pids()
        look = env.step(
            {
                "command": "grep -l run_checks /proc/[0-9]*/cmdline 2>/dev/null; "
                "find / -xdev -name 'test_hello.py' 2>/dev/null; ls -A /.t1-verifier; echo scanned"
            }
        )[0]
        assert "run_checks" not in look and "test_hello.py" not in look and "scanned" in look, look
        env.step({"command": "pkill -9 -f run_checks; pkill -9 -f bwrap; pkill -9 python3; true"})
        assert prepared.proc.poll() is None  # still waiting
        _, reward, terminated, _, info = env.step({"submit": True})
    finally:
        env.close()
    assert terminated and info["verifier_prepared"] and info["verifier_error"] is None, info
    assert (reward, info["passed"], info["total"]) == (noop["passed"], noop["passed"], noop["total"])


def test_stop_ends_a_prepared_verifier_that_never_ran():
    """A sandbox stopped before any verification (the episode truncated, the env closed) leaves nothing of its
    prepared verifier: no process, no cgroup, no staged folder. One prepared before the task was known and
    completed later is the same verifier (not a second one)."""
    task = get_task(TASK)
    box = make_sandbox("local", task)
    box.start()
    try:
        assert prepare(box)  # the prestarted spare's way: nothing of the task yet
        first = box._prepared
        assert first.task is None and not any((first.staged / "tests").iterdir())
        assert prepare(box, task)
        assert (
            box._prepared is first and first.task is not None and (first.staged / "tests" / "test_hello.py").is_file()
        )
        pids, dirs, staged = first.cgroups.pids(), list(first.cgroups.dirs), first.staged
        assert pids
    finally:
        box.stop()
    assert first.proc.poll() is not None
    assert not [p for p in pids if Path(f"/proc/{p}").exists() and b"bwrap" in _cmdline(p)]
    assert not [d for d in dirs if d.exists()] and not staged.exists()


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_a_verifier_prepared_for_other_mounts_is_discarded_not_used():
    """A run whose mounts differ from what was prepared (an imported task's tests alias) discards the prepared
    verifier and starts cold; the run is the cold one's (``prepared`` False)."""
    task = get_task(TASK)
    box = make_sandbox("local", task)
    box.start()
    try:
        assert prepare(box)
        first = box._prepared
        run = box.run_verifier(runtime_bundle(), task.tests_dir, 60, "separate", VerifierOptions(tests_alias="/tests"))
        assert run.prepared is False and first.proc.poll() is not None and box._prepared is None
        assert b'"event": "finished"' in run.result.stdout
    finally:
        box.stop()
