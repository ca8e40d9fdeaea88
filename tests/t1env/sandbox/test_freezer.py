"""The freezer's ptrace mechanism (what holds the agent's processes where no cgroup freezer is writable: t1 as a
normal user), attacked by processes that wake each other: a pair that ``SIGCONT``\\ s each other and every process
it can see in a tight loop, re-forks, and runs a busy thread. Chosen explicitly here, so that it is tested as
root too; as a normal user (CI runs this file as one) it is what shared-mode verification uses."""

import time

import pytest

from t1env.sandbox.freezer import FreezeError, Freezer, _state, _tracer_pid, tasks_in_namespace

WAKERS = """
import os, signal, sys, threading

def count(tag, n):
    with open(f"/app/count.{tag}", "w") as f:
        f.write(str(n))

def spin():
    n = 0
    while True:
        n += 1
        if n % 5000 == 0:
            count("thread", n)

threading.Thread(target=spin, daemon=True).start()
keep = int(open("/app/stopped.pid").read()) if os.path.exists("/app/stopped.pid") else None  # the test's own
a = os.getpid()
b = os.fork()
peer, tag = (a, "b") if b == 0 else (b, "a")
n = 0
while True:
    for p in [peer] + [int(x) for x in os.listdir("/proc") if x.isdigit() and int(x) != keep]:
        try:
            os.kill(p, signal.SIGCONT)
        except OSError:
            pass
    n += 1
    if n % 20 == 0:
        if os.fork() == 0:
            os._exit(0)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        count(tag, n)
"""

TRACER = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
pid = int(open("/app/victim.pid").read())
assert libc.ptrace(16, pid, 0, 0) == 0, os.strerror(ctypes.get_errno())  # PTRACE_ATTACH
sig = 0
while True:  # it runs on, held by this process alone: every signal it gets is handed on (PTRACE_CONT)
    libc.ptrace(7, pid, 0, sig)
    open("/app/traced", "w").write("1")
    _, status = os.waitpid(pid, 0x40000000)
    sig = os.WSTOPSIG(status) if os.WIFSTOPPED(status) and os.WSTOPSIG(status) != 19 else 0
"""


def _start(box, name, source, until):
    box.put_file(f"/tmp/{name}.py", source.encode())
    box.exec(["bash", "-c", f"(setsid nohup python3 /tmp/{name}.py >/dev/null 2>&1 </dev/null &)"], timeout=30)
    _wait_for(lambda: all((box.host_workdir / f).exists() for f in until), f"{name} did not start")


def _wait_for(cond, what, limit=60.0):
    end = time.monotonic() + limit
    while not cond():
        if time.monotonic() > end:
            pytest.fail(what)
        time.sleep(0.05)


def _counts(box) -> dict[str, str]:
    return {p.name: p.read_text() for p in box.host_workdir.glob("count.*")}


def test_ptrace_freeze_holds_processes_that_wake_each_other_and_thaw_resumes_them(box):
    box.exec(["bash", "-c", "(setsid sleep 1000 >/dev/null 2>&1 </dev/null & echo $! > /app/stopped.pid)"], timeout=30)
    stopped = int(box.exec(["cat", "/app/stopped.pid"], timeout=30).stdout)  # its pid inside the sandbox
    box.exec(["kill", "-STOP", str(stopped)], timeout=30)  # the agent stopped it itself: it must stay stopped
    _start(box, "wakers", WAKERS, ["count.a", "count.b", "count.thread"])
    freezer = Freezer(box.init_pid, mechanisms=("ptrace",))
    assert freezer.freeze() == "ptrace" and freezer.mechanism == "ptrace"
    try:
        tasks = tasks_in_namespace(box.init_pid)
        states = {tid: _state(tid) for tid in tasks}
        tracers = {tid: _tracer_pid(tid) for tid in tasks}
        frozen = _counts(box)
        time.sleep(0.5)
        assert _counts(box) == frozen  # nothing counted on
        # every task is stopped by the tracer (t), or was stopped already (T), or is a zombie; a task that is still
        # in the kernel (woken from a lock as the freeze ended) is the tracer's, and traps before it runs user code
        held = {t: s in "tTZ" or tracers[t] == freezer.tracer_tid for t, s in states.items()}
        assert held and all(held.values()), (states, tracers)
        assert sum(tracers[t] == freezer.tracer_tid for t in tasks) >= 5  # sandbox init, its sh, the pair, the thread
    finally:
        freezer.thaw()
    _wait_for(lambda: all(_counts(box)[k] != frozen[k] for k in frozen), "the processes did not run again after thaw")
    r = box.exec(["bash", "-c", f"grep '^State' /proc/{stopped}/status"], timeout=30)
    assert b"stopped" in r.stdout, r  # the process the agent stopped is stopped still


def test_ptrace_freeze_is_refused_when_a_process_of_the_sandbox_traces_another(box):
    """An agent can block the seize by tracing its own processes: then the freeze is refused, in one line, and
    nothing stays held."""
    _start(box, "wakers", WAKERS, ["count.a", "count.b"])
    box.exec(["bash", "-c", "pgrep -f /tmp/wakers.py | head -n 1 > /app/victim.pid"], timeout=30)
    _start(box, "tracer", TRACER, ["traced"])
    freezer = Freezer(box.init_pid, mechanisms=("ptrace",))
    with pytest.raises(FreezeError) as e:
        freezer.freeze()
    msg = str(e.value)
    assert "\n" not in msg and "traced by its process" in msg and "backend='docker'" in msg, msg
    before = _counts(box)
    _wait_for(lambda: all(_counts(box)[k] != before[k] for k in before), "processes stayed held after the refusal")
