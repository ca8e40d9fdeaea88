"""Freeze every process of a local sandbox while its shared-mode verifier starts, or refuse.

In ``shared`` verification mode the agent's processes keep running beside the verifier. The
verifier makes itself non-dumpable as its first act, after which no agent process can open its
``/proc/<pid>/fd`` entries, read its memory or attach to it; :class:`Freezer` closes the instant
before that: the host freezes the sandbox's processes, starts the verifier, waits for its first
report line, and thaws them. A freeze that does not hold is worse than none, so where no mechanism
below holds, :meth:`Freezer.freeze` raises :class:`FreezeError` and the verifier does not start.

Mechanisms, best first (:attr:`Freezer.mechanism` says which one held):

* **cgroup v1** ``freezer``: a cgroup of the sandbox's own that its processes are moved into (t1 as
  root on a cgroup v1 host).
* **cgroup v2** ``cgroup.freeze`` on the sandbox's cgroup (root, or a user with a delegated subtree).
* **ptrace**, where no cgroup freezer is writable (t1 as a normal user, the usual case): a tracer
  thread ``PTRACE_SEIZE``\\ s every thread of every process of the sandbox's pid namespace (with
  ``PTRACE_O_TRACEFORK|VFORK|CLONE``, so a task they create is attached and stopped before it runs)
  and ``PTRACE_INTERRUPT``\\ s it, until a pass over the namespace finds no task that is not held.
  A ptrace-stopped task is resumed only by its tracer, never by another process's ``SIGCONT``, so
  processes that wake each other stay stopped (a ``SIGSTOP`` loop cannot promise that: it has no
  atomic snapshot). A task counts as held once it reported its stop, or while it sleeps
  uninterruptibly in the kernel after the interrupt (a ``vfork`` parent waiting for its stopped
  child): it traps before it returns to user code. The user who started the sandbox owns its user
  namespace, so it may trace its processes, non-dumpable ones included. Thaw detaches each task and
  hands back the signals the stops intercepted; when the tracer thread ends, the kernel detaches
  whatever is left, so even a failed thaw resumes everything.

Refused (:class:`FreezeError`, one line saying why and what to do): ptrace is not permitted here
(an LSM such as Yama at ``ptrace_scope`` 3), a process of the sandbox is already traced by another
of its processes (an agent can do that to block the freeze), or the processes do not all stop
within the time limit.

The sandbox's processes are found by their pid namespace (``/proc/<pid>/ns/pid``), so nothing the
agent does to its cgroups or process names hides one.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
import time
import uuid
from pathlib import Path

from t1env.sandbox.base import SandboxError
from t1env.sandbox.cgroups import SandboxCgroups

CGROUP_ROOT = Path("/sys/fs/cgroup")
_read, _write = SandboxCgroups._read, SandboxCgroups._write  # best-effort cgroup file access

MECHANISMS = ("cgroup v1 freezer", "cgroup v2 cgroup.freeze", "ptrace")

_REMEDY = (
    "run t1 as root, use backend='docker', or run t1 in a delegated cgroup v2 subtree "
    "(`systemd-run --user --scope -p Delegate=yes <command>`)"
)


class FreezeError(SandboxError):
    """The sandbox's processes could not be frozen, so shared-mode verification is refused."""


def pids_in_namespace(init_pid: int) -> set[int]:
    """Host pids of the processes in ``init_pid``'s pid namespace (``init_pid`` itself included)."""
    try:
        ns = os.readlink(f"/proc/{init_pid}/ns/pid")
    except OSError:
        return set()
    out = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{name}/ns/pid") == ns:
                out.add(int(name))
        except OSError:
            pass
    return out


def tasks_in_namespace(init_pid: int) -> set[int]:
    """Host thread ids of every thread of every process in ``init_pid``'s pid namespace."""
    out = set()
    for pid in pids_in_namespace(init_pid):
        try:
            out.update(int(t) for t in os.listdir(f"/proc/{pid}/task"))
        except OSError:
            pass  # gone meanwhile
    return out


class Freezer:
    """Freezes the processes of the pid namespace of ``init_pid`` (see the module docstring).

    Args:
        init_pid: host pid of any process in the sandbox's pid namespace (its pid 1).
        v2_cgroup: the sandbox's own cgroup on a cgroup v2 host (holding only its processes), if any.
        mechanisms: the mechanisms to try, in order (default: all of :data:`MECHANISMS`, best first).
    """

    def __init__(self, init_pid: int, v2_cgroup: Path | None = None, mechanisms: tuple[str, ...] = MECHANISMS):
        unknown = set(mechanisms) - set(MECHANISMS)
        if unknown:
            raise ValueError(f"unknown freezer mechanism(s) {sorted(unknown)}: choose from {list(MECHANISMS)}")
        self.init_pid = init_pid
        self.v2_cgroup = v2_cgroup
        self.mechanisms = tuple(mechanisms)
        self.mechanism = "none"
        self._v1: Path | None = None
        self._v1_parent: Path | None = None
        self._tracer: _Tracer | None = None

    @property
    def tracer_tid(self) -> int | None:
        """Host tid of the thread holding the tasks (mechanism ``ptrace``, until :meth:`thaw`): their ``TracerPid``."""
        return self._tracer.tid if self._tracer is not None else None

    # -- freeze ------------------------------------------------------------------------------
    def freeze(self, timeout: float = 5.0) -> str:
        """Freeze every process of the sandbox; returns the mechanism that held.

        Raises:
            FreezeError: no mechanism held (the message says why and what to do).
        """
        why = "no cgroup freezer is writable by this user"
        for name in self.mechanisms:
            deadline = time.monotonic() + timeout
            if name == "cgroup v1 freezer":
                ok = self._freeze_v1(deadline)
            elif name == "cgroup v2 cgroup.freeze":
                ok = self._freeze_v2(deadline)
            else:
                tracer = _Tracer(self.init_pid)
                problem = tracer.freeze(deadline)
                ok = problem is None
                if ok:
                    self._tracer = tracer
                else:
                    why = f"{why}, and ptrace could not hold them: {problem}"
            if ok:
                self.mechanism = name
                return name
        raise FreezeError(
            f"shared-mode verification refused: the sandbox's processes cannot be frozen ({why}); {_REMEDY}"
        )

    def _freeze_v1(self, deadline: float) -> bool:
        own = _own_cgroup("freezer")
        if own is None or not (CGROUP_ROOT / "freezer").is_dir():
            return False
        parent = CGROUP_ROOT / "freezer" / own.lstrip("/")
        d = parent / f"t1-freeze-{uuid.uuid4().hex[:12]}"
        try:
            d.mkdir()
        except OSError:
            return False
        self._v1, self._v1_parent = d, parent
        self._move_all(d, deadline)
        if not _write(d / "freezer.state", "FROZEN"):
            self._drop_v1()
            return False
        while _read(d / "freezer.state").strip() != "FROZEN" and time.monotonic() < deadline:
            time.sleep(0.001)
        self._move_all(d, deadline)  # anything forked in between joins the frozen cgroup (and freezes)
        return True

    def _move_all(self, d: Path, deadline: float) -> None:
        """Move the sandbox's processes into ``d`` until a pass finds none outside it."""
        while time.monotonic() < deadline:
            inside = {int(x) for x in _read(d / "cgroup.procs").split()}
            todo = pids_in_namespace(self.init_pid) - inside
            if not todo:
                return
            for pid in todo:
                _write(d / "cgroup.procs", str(pid))

    def _freeze_v2(self, deadline: float) -> bool:
        d = self.v2_cgroup
        if d is None or not (d / "cgroup.freeze").exists():
            return False
        if not _write(d / "cgroup.freeze", "1"):
            return False
        while "frozen 1" not in _read(d / "cgroup.events") and time.monotonic() < deadline:
            time.sleep(0.001)
        return True

    # -- thaw --------------------------------------------------------------------------------
    def thaw(self) -> None:
        """Undo :meth:`freeze` (idempotent; any thread may call it)."""
        if self._v1 is not None:
            _write(self._v1 / "freezer.state", "THAWED")
            self._drop_v1()
        if self.mechanism == "cgroup v2 cgroup.freeze" and self.v2_cgroup is not None:
            _write(self.v2_cgroup / "cgroup.freeze", "0")
        tracer, self._tracer = self._tracer, None
        if tracer is not None:
            tracer.release()

    def _drop_v1(self) -> None:
        d, parent, self._v1 = self._v1, self._v1_parent, None
        if d is None or parent is None:
            return
        for _ in range(100):
            pids = _read(d / "cgroup.procs").split()
            for pid in pids:
                _write(parent / "cgroup.procs", pid)
            try:
                d.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.002)


# ---------------------------------------------------------------------------------------------
# ptrace: one tracer thread holds every task of the namespace
# ---------------------------------------------------------------------------------------------

_PTRACE_DETACH = 17
_PTRACE_SEIZE = 0x4206
_PTRACE_INTERRUPT = 0x4207
_PTRACE_O_FORKS = 0x2 | 0x4 | 0x8  # PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACECLONE
_WALL = 0x40000000  # __WALL: wait for threads and non-children alike
_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_libc.ptrace.restype = ctypes.c_long


def _ptrace(request: int, tid: int, data: int = 0) -> int:
    """0, or the errno of the failed request."""
    return 0 if _libc.ptrace(request, tid, None, ctypes.c_void_p(data)) == 0 else ctypes.get_errno()


class _Tracer:
    """A thread that seizes and interrupts every task of the namespace, holds them until :meth:`release`,
    then detaches them and ends. Every ptrace request comes from this one thread, as the kernel requires."""

    def __init__(self, init_pid: int):
        self.init_pid = init_pid
        self._held = threading.Event()
        self._release = threading.Event()
        self._problem: str | None = None
        self._thread: threading.Thread | None = None
        self.tid: int | None = None  # the tracer thread's host tid (a held task's TracerPid)

    def freeze(self, deadline: float) -> str | None:
        """Hold every task; None once they are all held, else why not (then nothing stays held)."""
        self._thread = threading.Thread(target=self._run, args=(deadline,), name="t1-freezer-tracer", daemon=True)
        self._thread.start()
        self._held.wait()
        if self._problem is not None:
            self._thread.join()
        return self._problem

    def release(self) -> None:
        self._release.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10)

    def _run(self, deadline: float) -> None:
        stops: dict[int, int | None] = {}  # tid -> signal to hand back at detach (0: none); None: not stopped yet
        try:
            self._hold_all(stops, deadline)
        except _Refused as e:
            self._problem = str(e)
        except OSError as e:
            self._problem = f"{e.strerror or e}"
        self._held.set()
        if self._problem is None:
            self._release.wait()
        for tid, sig in stops.items():
            if sig is not None:
                _ptrace(_PTRACE_DETACH, tid, sig)
        # the thread ends here: the kernel detaches any task still traced (one that never reported its stop)

    def _hold_all(self, stops: dict[int, int | None], deadline: float) -> None:
        me = self.tid = threading.get_native_id()
        dead: set[int] = set()  # zombies: they run nothing, and cannot be traced
        while True:
            new = [t for t in tasks_in_namespace(self.init_pid) if t not in stops and t not in dead]
            for tid in new:
                self._seize(tid, me, stops, dead)
            while not self._all_stopped(stops):
                if time.monotonic() > deadline:
                    running = sorted(t for t, s in stops.items() if s is None)
                    raise _Refused(f"{len(running)} task(s) of the sandbox did not stop in time (e.g. {running[:3]})")
                time.sleep(0.0005)
            if not new:  # a pass made after every task was held found no other task: nothing can run
                self._settle(stops, min(deadline, time.monotonic() + 0.2))
                return
            if time.monotonic() > deadline:
                raise _Refused("the sandbox kept making new tasks while it was being frozen")

    def _seize(self, tid: int, me: int, stops: dict[int, int | None], dead: set[int]) -> None:
        err = _ptrace(_PTRACE_SEIZE, tid, _PTRACE_O_FORKS)
        if err == errno.EPERM:
            state = _state(tid)
            tracer = _tracer_pid(tid)
            if state in ("Z", "X", ""):
                dead.add(tid)  # exiting or exited: runs no more user code
                return
            if tracer != me:
                if tracer:
                    raise _Refused(f"task {tid} of the sandbox is traced by its process {tracer}, which holds it")
                raise _Refused(
                    f"the kernel refuses to let this user trace the sandbox's task {tid} ({os.strerror(err)})"
                )
            # a child of a held task: attached at birth, and stops before it runs
        elif err == errno.ESRCH:
            return  # gone
        elif err:
            raise _Refused(f"PTRACE_SEIZE of the sandbox's task {tid}: {os.strerror(err)}")
        stops[tid] = None
        _ptrace(_PTRACE_INTERRUPT, tid)

    def _settle(self, stops: dict[int, int | None], until: float) -> None:
        """Give tasks held in the kernel (they woke meanwhile, e.g. once a sibling's fork released the memory
        map's lock) a moment to report their stop, so that they are stopped, not only bound to stop."""
        while any(s is None for s in stops.values()) and time.monotonic() < until:
            self._all_stopped(stops, kernel_counts=False)
            time.sleep(0.0005)

    @staticmethod
    def _all_stopped(stops: dict[int, int | None], kernel_counts: bool = True) -> bool:
        done = True
        for tid, sig in list(stops.items()):
            if sig is not None:
                continue
            try:
                got, status = os.waitpid(tid, os.WNOHANG | _WALL)
            except ChildProcessError:
                del stops[tid]  # gone and reaped
                continue
            if got == tid and os.WIFSTOPPED(status):
                # a signal-delivery stop (no event in the high bits) intercepted that signal: hand it back later
                stops[tid] = os.WSTOPSIG(status) if status >> 16 == 0 else 0
            elif got == tid:
                del stops[tid]  # it exited
            elif kernel_counts and _state(tid) == "D":
                continue  # in the kernel, uninterruptibly: it traps before it returns to user code
            else:
                done = False
        return done


class _Refused(Exception):
    pass


def _own_cgroup(controller: str) -> str | None:
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and controller in parts[1].split(","):
            return parts[2]
    return None


def _state(pid: int) -> str:
    """The process state letter from /proc/<pid>/stat (R, S, T, Z, ...; empty when it is gone)."""
    stat = _read(Path(f"/proc/{pid}/stat"))
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[0] if fields else ""


def _tracer_pid(tid: int) -> int:
    """The host tid of the task tracing ``tid`` (0: none, or ``tid`` is gone)."""
    for line in _read(Path(f"/proc/{tid}/status")).splitlines():
        if line.startswith("TracerPid:"):
            return int(line.split()[1])
    return 0
