"""The local backend's verifier zygote (issue 27): pytest imported once, a fresh verifier forked into each episode.
One test per claim of ``t1env/sandbox/local_zygote.py``'s docstring; the reward-integrity suite
(tests/t1env/test_reward_integrity.py) plays every attack through it too (it is the env's default)."""

import json
import os
import textwrap
from pathlib import Path

import pytest

import t1env.sandbox.local_zygote as lz
from t1env.agent.reference import oracle_command
from t1env.env import TerminalEnv
from t1env.registry import get_task
from t1env.sandbox.base import SandboxError

from .conftest import play as episode
from .conftest import results

TASK = "hello-file"

# A check that reports what its process sees, in its failure message: capabilities, no_new_privs, seccomp, the
# processes it can see (with pid 1's command line), whether the host's episode folders or any other episode's
# marker are visible, and its mounts' count of t1-sbx folders.
FACTS = textwrap.dedent(
    """
    import glob, json, os

    def test_facts():
        status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
        pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        cmd1 = open("/proc/1/cmdline", "rb").read().replace(b"\\0", b" ").decode()
        facts = {k: status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs",
                                                "Seccomp")}
        facts.update(pids=pids, pid1=cmd1, episodes=os.listdir("/.t1-episodes") if os.path.isdir("/.t1-episodes") else [],
                     markers=sorted(glob.glob("/tmp/marker-*") + glob.glob("/app/marker-*")),
                     sbx_mounts=open("/proc/self/mountinfo").read().count("t1-sbx-"))
        assert False, "FACTS" + json.dumps(facts)
    """
)


@pytest.fixture(autouse=True)
def zygotes_on():
    """Each test starts with zygotes on in the process (a refusal turns them off)."""
    lz._off = None
    yield
    lz._off = None


def facts(info: dict) -> dict:
    (check,) = info["checks"]
    return json.loads(check["message"].split("FACTS", 1)[1].split("\n")[0].rstrip("'\""))


def test_zygote_scores_what_a_cold_verifier_scores(monkeypatch):
    """Oracle and no-op through a zygote and through a verifier started at submission: the same check results. Two
    episodes of one env use one zygote (started once)."""
    started = []
    spawn = lz._spawn
    monkeypatch.setattr(lz, "_spawn", lambda *a: started.append(1) or spawn(*a))
    solve = [oracle_command(get_task(TASK))]
    env = TerminalEnv(task=TASK, prestart=False)
    try:
        warm = [episode(TASK, c, env) for c in (solve, [])]
    finally:
        env.close()
    cold = [episode(TASK, c, prepare_verifier=False) for c in (solve, [])]
    assert len(started) == 1
    for w, c in zip(warm, cold):
        assert w["verifier_prepared"] and not c["verifier_prepared"] and w["verifier_error"] is None
        assert results(w) == results(c), (w["checks"], c["checks"])
    assert warm[0]["passed"] == warm[0]["total"] and warm[1]["passed"] < warm[1]["total"]


def test_checks_run_with_the_cold_verifiers_capabilities_filter_and_view(make_task, monkeypatch):
    """A check's process through the zygote has exactly the capabilities (its bounding set a subset), no_new_privs and
    seccomp filter of one in a cold verifier's sandbox; it sees only its own pid namespace (pid 1 its verifier),
    neither the host's episode folders (their mount point is empty) nor any other episode's, and as many episode-folder
    mounts as a cold verifier."""
    task = make_task("facts", tests={"test_facts.py": FACTS})
    other = TerminalEnv(task=str(task), prestart=False)  # another episode, in play while the check runs
    try:
        other.reset(seed=0)
        other.step({"command": "touch /tmp/marker-other /app/marker-other"})
        z = facts(episode(str(task), ["touch /tmp/marker-mine"]))
        monkeypatch.setenv("T1_VERIFIER_ZYGOTE", "0")
        cold = facts(episode(str(task), ["touch /tmp/marker-mine"]))
    finally:
        other.close()
    caps = ("CapInh", "CapPrm", "CapEff", "CapAmb", "NoNewPrivs", "Seccomp")
    assert {k: z[k] for k in caps} == {k: cold[k] for k in caps}, (z, cold)
    assert z["NoNewPrivs"] == "1" and z["Seccomp"] == "2"
    # the bounding set: bubblewrap leaves it full (no_new_privs keeps an exec from raising anything); the zygote's
    # verifier cuts it to the capabilities kept (so CAP_SYS_ADMIN, which the zygote holds, is in neither)
    bounding, effective = int(z["CapBnd"], 16), int(z["CapEff"], 16)
    assert bounding == effective and bounding & int(cold["CapBnd"], 16) == bounding and not bounding & (1 << 21)
    assert z["pids"][0] == 1 and "run_checks.py" in z["pid1"] and len(z["pids"]) <= 3, z  # verifier, check, (ps)
    assert z["episodes"] == [] and z["markers"] == ["/tmp/marker-mine"] == cold["markers"], (z, cold)
    assert z["sbx_mounts"] == cold["sbx_mounts"], (z, cold)


def test_agent_cannot_see_reach_or_starve_the_zygote():
    """While the agent plays, the zygote is in pid and mount namespaces and cgroups other than the agent's; the agent
    finds no verifier process, and its kills by name reach nothing. The zygote still verifies at submission."""
    env = TerminalEnv(task=TASK, prestart=False)
    try:
        env.reset(seed=0)
        env._wait_for_prepare()
        box = env.sandbox
        (z,) = env._zygotes.idle()
        pids = z.cgroups.pids()
        assert pids
        for kind in ("pid", "mnt", "net"):
            assert all(
                os.readlink(f"/proc/{p}/ns/{kind}") != os.readlink(f"/proc/{box.init_pid}/ns/{kind}") for p in pids
            )
        assert not set(z.cgroups.dirs) & set(box._cg.dirs) and not pids & box._cg.pids()
        look = env.step({"command": "grep -l run_checks /proc/[0-9]*/cmdline 2>/dev/null; ls -A /; echo scanned"})[0]
        assert "run_checks" not in look and ".t1-episodes" not in look and "scanned" in look, look
        env.step({"command": "pkill -9 -f run_checks; pkill -9 -f bwrap; pkill -9 python3; true"})
        assert z.proc.poll() is None
        _, _, _, _, info = env.step({"submit": True})
    finally:
        env.close()
    assert info["verifier_prepared"] and info["verifier_error"] is None and info["total"] == 5, info


LEAVER = textwrap.dedent(
    """
    import os, subprocess, time

    def test_leave_a_daemon():
        subprocess.Popen(["setsid", "sh", "-c", "(while :; do sleep 0.05; done) & exec sleep 1000 # t1-leftover"])
        time.sleep(0.2)

    def test_nothing_left_from_before():
        procs = [open(f"/proc/{p}/cmdline", "rb").read() for p in os.listdir("/proc") if p.isdigit()]
        assert not [c for c in procs if b"t1-leftover" in c]
    """
)


def test_nothing_a_check_leaves_outlives_the_verification(make_task):
    """A check that leaves a daemon in its own session: when the verification ends, no process of it is left on the
    host, the next episode's checks see none, and the zygote verifies the next episode."""
    task = make_task("leaver", tests={"test_leave.py": LEAVER})
    env = TerminalEnv(task=str(task), prestart=False)
    try:
        first = episode(str(task), [], env)
        left = [p for p in os.listdir("/proc") if p.isdigit() and b"t1-leftover" in _cmdline(p)]
        second = episode(str(task), [], env)
    finally:
        env.close()
    assert not left
    for info in (first, second):
        assert [(c["name"], c["passed"]) for c in info["checks"]] == [
            ("test_leave.py::test_leave_a_daemon", True),
            ("test_leave.py::test_nothing_left_from_before", True),
        ], info["checks"]


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_a_verification_past_its_timeout_ends_its_zygote_and_the_next_starts_one(make_task, monkeypatch):
    """A check that outlives the verifier timeout: the run is timed out, that zygote (and everything in it) is ended,
    not reused; the next episode verifies through a new one."""
    used = []
    take = lz.ZygotePool._take
    monkeypatch.setattr(lz.ZygotePool, "_take", lambda *a: used.append(take(*a)) or used[-1])
    task = make_task("slow", tests={"test_slow.py": "import time\n\ndef test_slow():\n    time.sleep(60)\n"})
    env = TerminalEnv(task=str(task), prestart=False, verifier_timeout=3)
    try:
        first = episode(str(task), [], env)
        second = episode(str(task), [], env)
    finally:
        env.close()
    for info in (first, second):
        assert info["verifier_prepared"] and "timed out" in (info["verifier_error"] or ""), info["verifier_error"]
    assert len(used) == 2 and used[0] is not used[1] and used[0].proc.poll() is not None
    assert not [d for d in used[0].cgroups.dirs if d.exists()]


def test_close_ends_the_zygotes():
    """An env's close() ends its zygotes (each env has its own): no process, no cgroup, no folder is left."""
    env = TerminalEnv(task=TASK, prestart=False)
    try:
        episode(TASK, [], env)
        (z,) = env._zygotes.idle()
        pids, dirs, folder = z.cgroups.pids(), list(z.cgroups.dirs), z.folder
        assert pids and folder.is_dir()
    finally:
        env.close()
    assert z.proc.poll() is not None and not env._zygotes.idle()
    assert not [p for p in pids if Path(f"/proc/{p}").exists() and b"bwrap" in _cmdline(str(p))]
    assert not [d for d in dirs if d.exists()] and not folder.exists()


def test_a_zygote_that_cannot_start_turns_zygotes_off_and_verification_goes_on(monkeypatch, caplog):
    """Where the kernel refuses a zygote, verification goes on through the prepared verifier, with one warning, and
    zygotes stay off in the process."""

    def refuse(*a):
        raise SandboxError("the verifier zygote did not start: unshare: Operation not permitted")

    monkeypatch.setattr(lz, "_spawn", refuse)
    info = episode(TASK, [oracle_command(get_task(TASK))])
    assert info["passed"] == info["total"] == 5 and info["verifier_error"] is None, info
    assert lz._off and "Operation not permitted" in lz._off
    assert [r for r in caplog.records if "zygotes are off" in r.getMessage()]


def test_idle_zygotes_beyond_the_cap_are_ended_longest_idle_first(make_task, monkeypatch):
    """An env that moves between tasks of different sandbox shapes keeps at most MAX_IDLE idle zygotes: the one idle
    longest is ended (its process and cgroups gone), the newest stays."""
    monkeypatch.setattr(lz.ZygotePool, "MAX_IDLE", 1)
    first = make_task("in-app")
    second = make_task("in-work", toml_extra='[environment]\nworkdir = "/work"\n', solve="true\n")
    env = TerminalEnv(tasks=[str(first), str(second)], prestart=False)
    try:
        episode(str(first), [], env)
        (a,) = env._zygotes.idle()
        episode(str(second), [], env)
        (b,) = env._zygotes.idle()
        assert b is not a and a.proc.poll() is not None and not [d for d in a.cgroups.dirs if d.exists()]
    finally:
        env.close()


@pytest.mark.parametrize("moment", ["said ready", "spawned"])
def test_close_while_a_zygote_starts_returns_once_it_is_gone(monkeypatch, moment):
    """close() while warm() is starting a zygote (it said ready but is not idle yet, or its process was just
    spawned): close() returns only once that zygote's process, cgroups and folder are gone (CI once found a folder
    left behind). The moment is held open with events, not timing."""
    import threading

    reached, go = threading.Event(), threading.Event()
    seen = []
    real = lz._await_ready if moment == "said ready" else lz._spawn

    def held(*a):
        out = real(*a)
        seen.append(out if moment == "spawned" else a[0])
        reached.set()
        assert go.wait(60)
        return out

    monkeypatch.setattr(lz, "_await_ready" if moment == "said ready" else "_spawn", held)
    env = TerminalEnv(task=TASK, prestart=False)
    warming = threading.Thread(target=env.reset, kwargs={"seed": 0})
    warming.start()
    assert reached.wait(60)
    closing = threading.Thread(target=env._zygotes.close)
    closing.start()
    if moment == "said ready":  # close() has marked it ended once it took the lock
        while not seen[0].closed and closing.is_alive():
            closing.join(0.01)
    else:  # close() counted one starting and waits for it
        while not env._zygotes._closes:
            closing.join(0.01)
    go.set()
    closing.join()
    (z,) = seen
    assert z.proc.poll() is not None and not z.folder.exists() and not [d for d in z.cgroups.dirs if d.exists()]
    assert not env._zygotes.idle(wait=False)
    warming.join()
    env.close()


@pytest.mark.parametrize("zygote", [True, False], ids=["zygote", "prepared-verifier"])
def test_an_episode_outlives_the_thread_that_reset_it(monkeypatch, zygote):
    """A reset in a thread that then exits (an engine's worker, a caller's thread) leaves an episode that plays and
    verifies: bwrap's parent-death signal follows the thread that started it, so the agent's sandbox, the prepared
    verifier and the zygote are started from one long-lived thread (t1env/sandbox/launcher.py), never the caller's.
    With zygotes, the one the reset warmed is the one that verifies."""
    import threading

    if not zygote:
        monkeypatch.setenv("T1_VERIFIER_ZYGOTE", "0")
    started = []
    spawn = lz._spawn
    monkeypatch.setattr(lz, "_spawn", lambda *a: started.append(1) or spawn(*a))
    env = TerminalEnv(task=TASK, prestart=False)
    try:
        t = threading.Thread(target=env.reset, kwargs={"seed": 0})
        t.start()
        t.join()
        assert len(env._zygotes.idle()) == zygote and lz._off is None
        env.step({"command": oracle_command(get_task(TASK))})
        info = env.step({"submit": True})[-1]
        assert info["passed"] == 5 and info["verifier_prepared"] and started == [1] * zygote, (info, started)
    finally:
        env.close()


def test_envs_that_share_a_pool_start_one_zygote(monkeypatch):
    """An env per episode (t1train's rollouts, t1env eval) given one pool (``zygote_pool=``): one zygote for all of
    them, which their close() leaves running and the pool's owner ends."""
    started = []
    spawn = lz._spawn
    monkeypatch.setattr(lz, "_spawn", lambda *a: started.append(1) or spawn(*a))
    pool = lz.ZygotePool()
    try:
        for _ in range(3):
            env = TerminalEnv(task=TASK, prestart=False, zygote_pool=pool)
            assert env.shared_zygote_pool is pool
            info = episode(TASK, [oracle_command(get_task(TASK))], env)
            env.close()
            assert info["passed"] == 5 and info["verifier_prepared"], info
        (z,) = pool.idle()
        assert started == [1] and z.proc.poll() is None
    finally:
        pool.close()
    assert z.proc.poll() is not None and not z.folder.exists()
    with pytest.raises(ValueError, match="zygote_pool must be a t1env.sandbox.local_zygote.ZygotePool"):
        TerminalEnv(task=TASK, zygote_pool="shared")
