"""The local backend's verifier zygote: pytest imported once, a fresh verifier forked into each episode.

A prepared verifier (:mod:`t1env.sandbox.local_verifier`) takes the verifier's start out of what the agent waits for,
but each episode still pays for a new interpreter, pytest's import and its session: about 0.4 s of CPU, most of an
oracle episode's. A **zygote** pays it once. It is ``run_checks.py --zygote-fd 0`` (see the runtime's docstring)
in a bubblewrap sandbox of its own, built like the verifier's (same user namespace mapping, read-only system, no
network, the sandbox's rlimits) in cgroups of its own with the sandbox's caps, with three differences while it
waits: its workdir, ``/tmp``, ``/root`` and the checks' HOME and private folders are empty mount points, the host's
temp folder (where every episode folder is) is bound at ``/.t1-episodes``, and it keeps ``CAP_SYS_ADMIN`` of its
user namespace and runs without the seccomp filter (to make the episode's mounts).

At submission the agent's processes are ended exactly as for any ``separate``-mode verifier, the task's tests, the
private state and the checks' HOME files are staged into the episode folder's ``prepared/`` (never bound into the
agent's sandbox), and one message on the zygote's socket names the episode folder. The zygote forks; the child
enters new mount and pid namespaces, binds that episode's folders where the cold verifier's sandbox has them, detaches
``/.t1-episodes``, and forks the episode's verifier as pid 1 of the new pid namespace, which mounts its own ``/proc``,
keeps only the sandbox's capabilities (bounding set included), sets ``no_new_privs`` and loads the sandbox's
seccomp filter before any test code runs. So the checks run as in a cold verifier's sandbox: the agent's processes
are gone, no other episode's folder is visible, and nothing they start outlives the verifier (its pid namespace
ends with it). Nothing of an episode runs in the zygote itself; the agent never shares a pid, mount or network
namespace or a cgroup with it.

Each :class:`~t1env.env.TerminalEnv` has its own zygotes (a :class:`ZygotePool`, given to its local sandboxes): one
per sandbox shape in use (a second only while two episodes verify at once), at most two idle, all ended by the env's
``close()``. The zygote is used with ``prepare_verifier`` on, ``separate`` mode, t1-format tasks (an imported task's
``tests_alias``/``private_dir`` take the prepared path) and a kernel that allows it; the first refusal turns zygotes off
for the process, with a warning, and verification goes on through the prepared verifier. ``T1_VERIFIER_ZYGOTE=0``
turns them off.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from pathlib import Path

from t1env.sandbox import seccomp
from t1env.sandbox.base import (
    PRIVATE_DIR,
    VERIFIER_DIR,
    VERIFIER_HOME,
    VERIFIER_HOME_FILES,
    ExecResult,
    SandboxError,
    VerifierOptions,
    VerifierRun,
    verifier_argv,
    verifier_env,
)
from t1env.sandbox.bounded import OutputCapture
from t1env.sandbox.cgroups import SandboxCgroups
from t1env.sandbox.staging import stage

log = logging.getLogger(__name__)

EPISODES = "/.t1-episodes"  # the host's temp folder, inside a zygote (run_checks.py's EPISODES)
READY_TIMEOUT = 60.0  # seconds for a zygote to import pytest and say ready
CAPS = {
    "chown": 0, "dac_override": 1, "dac_read_search": 2, "fowner": 3, "fsetid": 4, "kill": 5, "setgid": 6,
    "setuid": 7, "setpcap": 8, "linux_immutable": 9, "net_bind_service": 10, "net_broadcast": 11, "net_admin": 12,
    "net_raw": 13, "ipc_lock": 14, "ipc_owner": 15, "sys_module": 16, "sys_rawio": 17, "sys_chroot": 18,
    "sys_ptrace": 19, "sys_pacct": 20, "sys_admin": 21, "sys_boot": 22, "sys_nice": 23, "sys_resource": 24,
    "sys_time": 25, "sys_tty_config": 26, "mknod": 27, "lease": 28, "audit_write": 29, "audit_control": 30,
    "setfcap": 31,
}  # fmt: skip


@dataclass(eq=False)  # kept in a set: by identity
class Zygote:
    key: tuple
    proc: subprocess.Popen
    sock: socket.socket
    cgroups: SandboxCgroups
    folder: Path  # a t1-sbx-* folder with its owner and cgroups (for `t1env gc`) and its log
    closed: bool = False  # ended by its pool's close() while it started
    counted: bool = False  # in its pool's count of live zygotes of its shape


_off: str | None = None  # why zygotes are off in this process (the kernel refused one)
_pools: weakref.WeakSet = weakref.WeakSet()  # every pool of this process, ended at exit


def turn_off(why) -> None:
    """Zygotes are off in this process from now on (the kernel refused one), with a warning."""
    global _off
    if _off is None:
        _off = str(why)
        log.warning("verifier zygotes are off in this process (verification goes on without them): %s", why)


def usable(box, mode: str, opts: VerifierOptions | None) -> bool:
    """Whether ``box``'s verifier can come from a zygote (see the module docstring)."""
    opts = opts or VerifierOptions()
    pool = box.verifier_zygotes
    return (
        pool is not None
        and pool.mine()
        and _off is None
        and os.environ.get("T1_VERIFIER_ZYGOTE", "1") != "0"
        and mode == "separate"
        and not opts.tests_alias
        and not opts.private_dir
        and not box._ro_binds
        and box._root is not None
    )


def _key(box, runtime: Path) -> tuple:
    c = box.config
    return (
        str(runtime),
        str(box._root.parent),  # the temp folder it binds at /.t1-episodes
        c.workdir,
        tuple(box._caps()),
        box._userns,
        c.pids,
        c.memory_mb,
        c.file_size_mb,
        c.cpu_seconds,
        tuple(sorted(c.environ().items())),
    )


class ZygotePool:
    """The verifier zygotes of one env (:class:`~t1env.env.TerminalEnv` makes one and gives it to its local
    sandboxes as ``verifier_zygotes``), or of every env that is given it (``TerminalEnv(zygote_pool=...)``: the
    envs of a rollout run, of an eval executor, of a Ray worker): at most one per sandbox shape while no two
    episodes verify at once, at most :attr:`MAX_IDLE` idle (the one idle longest is ended first), all ended by
    :meth:`close` (and at the process's exit)."""

    MAX_IDLE = 2

    def __init__(self, max_idle: int | None = None) -> None:
        """``max_idle``: idle zygotes kept (default :attr:`MAX_IDLE`); a pool that several envs share keeps about
        as many as episodes verify at once."""
        if max_idle is not None:
            self.MAX_IDLE = max_idle
        self._lock = threading.Condition()
        self._idle: dict[tuple, list[Zygote]] = {}
        self._order: list[Zygote] = []  # the idle zygotes, longest idle first
        self._starting: dict[tuple, int] = {}  # zygotes of each shape being started by warm()
        self._alive: dict[tuple, int] = {}  # zygotes of each shape started and not ended (idle or verifying)
        self._pending: set[Zygote] = set()  # zygotes warm() started that have not said ready yet
        self._closes = 0  # how many times close() ran: a start that began before one is ended, not kept
        self._pid = os.getpid()
        _pools.add(self)

    def mine(self) -> bool:
        """False in a forked child: it never uses or ends its parent's zygotes."""
        return os.getpid() == self._pid

    def warm(self, box, runtime: Path) -> None:
        """Have a zygote of ``box``'s shape: if there is none (idle or verifying), start one. Only its process is
        started here; it imports pytest and says ready in the background (a verification that needs it waits for
        it). A second one is started only when two episodes verify at once (:meth:`run`)."""
        key = _key(box, runtime)
        with self._lock:
            if self._alive.get(key) or self._starting.get(key):
                return
            self._starting[key] = self._starting.get(key, 0) + 1
            closes = self._closes
        try:
            z = _spawn(box, runtime, key)
        except BaseException:
            self._started(key, None)
            raise
        with self._lock:
            self._pending.add(z)
            z.closed = self._closes != closes  # close() ran while it was being spawned: it did not see it
        if z.closed:
            _kill(z)

        def ready() -> None:
            try:
                _await_ready(z)
            except (SandboxError, OSError, ValueError) as e:
                if not z.closed:
                    turn_off(e)
                self._started(key, None, z)
                return
            self._started(key, z, z)

        threading.Thread(target=ready, name="t1env-zygote-start", daemon=True).start()

    def idle(self, wait: bool = True) -> list[Zygote]:
        """The idle zygotes (``wait``: once none is starting)."""
        with self._lock:
            while wait and any(self._starting.values()):
                self._lock.wait(READY_TIMEOUT)
            return [z for zs in self._idle.values() for z in zs]

    def close(self) -> None:
        """End every idle zygote and every one being started, and return once they are gone (one verifying now is
        ended when its verification ends)."""
        if not self.mine():
            return
        with self._lock:
            self._closes += 1
            zygotes = [z for zs in self._idle.values() for z in zs]
            self._idle.clear()
            self._order.clear()
            starting = list(self._pending)
            for z in starting:
                z.closed = True
        for z in starting:  # its start fails now; the thread that waits for it cleans it up
            _kill(z)
        with self._lock:
            while any(self._starting.values()):
                self._lock.wait(READY_TIMEOUT)
        for z in zygotes:
            self._end(z)

    def run(self, box, runtime: Path, tests: Path, opts: VerifierOptions, timeout: float, end_agent, stage):
        """End the agent, have ``stage(box, tests)`` put the task into the episode folder's ``prepared/`` (a no-op
        when prepare() staged it) and verify through a zygote: a :class:`VerifierRun`, or None if no zygote could be had (zygotes are then off in
        this process; the caller verifies the usual way)."""
        t0 = time.monotonic()
        try:
            z = self._take(box, runtime)
        except (SandboxError, OSError) as e:
            turn_off(e)
            return None
        ok = False
        try:
            end_agent(box)
            stage(box, tests)
            res = _verify(box, z, opts, timeout, t0)
            ok = not res.timed_out and res.exit_code != 3
            if res.exit_code == 3 and b"t1 verifier zygote:" in res.stderr and not res.stdout:
                # the kernel refused a mount, a namespace or a capability change before any check ran
                turn_off(res.stderr.decode(errors="replace").strip().splitlines()[-1])
                return None
            return VerifierRun(res, "separate", [], prepared=True)
        finally:
            if ok:
                self._give_back(z)
            else:
                self._end(z)

    # -- internals -------------------------------------------------------------------------------------------
    def _started(self, key: tuple, z: Zygote | None, spawned: Zygote | None = None) -> None:
        """A start that warm() began ended: ``z`` ready (idle now, unless close() ended it meanwhile) or None.

        One that close() ended is gone (process, cgroups, folder) before the start counts as ended: close() waits
        for that count and must not return while its folder is still there."""
        ended = []
        with self._lock:
            self._pending.discard(spawned)  # close() no longer sees it
            closed = z is not None and z.closed
            if not closed:
                self._starting[key] -= 1
                if z is not None:
                    self._alive[key] = self._alive.get(key, 0) + 1
                    z.counted = True
                    ended = self._idle_add(z)
                self._lock.notify_all()
        if closed:
            _end(z)
            with self._lock:
                self._starting[key] -= 1
                self._lock.notify_all()
        for old in ended:
            self._end(old)

    def _take(self, box, runtime: Path) -> Zygote:
        """An idle zygote of ``box``'s shape: one that warm() is starting is waited for; else a new one."""
        key = _key(box, runtime)
        dead = []
        with self._lock:
            while True:
                z = None
                while self._idle.get(key):
                    z = self._idle[key].pop()
                    self._order.remove(z)
                    if z.proc.poll() is None:
                        break
                    dead.append(z)
                    z = None
                if z is not None or not self._starting.get(key):
                    break
                self._lock.wait(READY_TIMEOUT)
        for d in dead:
            self._end(d)
        if z is None:
            z = _start(box, runtime, key)
            with self._lock:
                self._alive[key] = self._alive.get(key, 0) + 1
                z.counted = True
        return z

    def _give_back(self, z: Zygote) -> None:
        with self._lock:
            ended = self._idle_add(z) if z.proc.poll() is None else [z]
        for old in ended:
            self._end(old)

    def _idle_add(self, z: Zygote) -> list[Zygote]:
        """(lock held) ``z`` is idle; returns the zygotes idle longest beyond MAX_IDLE, taken out, to end."""
        self._idle.setdefault(z.key, []).append(z)
        self._order.append(z)
        evicted = []
        while len(self._order) > self.MAX_IDLE:
            old = self._order.pop(0)
            self._idle[old.key].remove(old)
            evicted.append(old)
        return evicted

    def _end(self, z: Zygote) -> None:
        with self._lock:
            if z.counted:
                self._alive[z.key] -= 1
                z.counted = False
        _end(z)


def shared_max_idle() -> int:
    """Idle zygotes a pool shared by the envs of a run keeps: one per core (verification is CPU-bound), 2 to 8."""
    return max(2, min(8, os.cpu_count() or 2))


def _close_pools() -> None:
    for pool in list(_pools):
        pool.close()


atexit.register(_close_pools)


def _argv(box, runtime: Path) -> list[str]:
    """bwrap's command line for a zygote of ``box``'s shape: the verifier's sandbox with empty mount points for the
    episode's folders, the temp folder at /.t1-episodes, CAP_SYS_ADMIN added and no seccomp filter."""
    argv = box._bwrap_argv()
    for f in box._launch_fds:  # the seccomp program's pipe: the episode's verifier loads the filter itself
        os.close(f)
    box._launch_fds = []
    root, c = str(box._root), box.config
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--bind", "--ro-bind") and argv[i + 1].startswith(root + "/"):
            inside = argv[i + 2]
            if inside == VERIFIER_DIR:
                out += ["--ro-bind", str(runtime), VERIFIER_DIR]  # with an empty tests/ (a mount point)
            elif inside != "/etc/resolv.conf":  # the verifier has no network
                out += ["--dir", inside]
            i += 3
            continue
        if a == "--seccomp":
            i += 2
            continue
        if a == "--remount-ro" and argv[i + 1] == "/":
            out += ["--bind", str(box._root.parent), EPISODES, "--dir", VERIFIER_HOME, "--dir", PRIVATE_DIR]
        out.append(a)
        i += 1
    caps = out.index("--cap-drop")
    out[caps + 2 : caps + 2] = ["--cap-add", "CAP_SYS_ADMIN"]
    return out + ["--as-pid-1", "--chdir", c.workdir, "--", *verifier_argv(extra=("--zygote-fd", "0"))]


def _start(box, runtime: Path, key: tuple) -> Zygote:
    """Start a zygote of ``box``'s shape and wait until it says ready."""
    z = _spawn(box, runtime, key)
    _await_ready(z)
    return z


def _spawn(box, runtime: Path, key: tuple) -> Zygote:
    """Start a zygote's process (in its sandbox, cgroups and folder); :func:`_await_ready` waits for its ready.
    Like every sandbox process it is started from the launcher thread (``box._start_bwrap``): a zygote outlives
    the episode, and the thread, that warmed it."""
    folder = Path(tempfile.mkdtemp(prefix="t1-sbx-"))
    (folder / "owner").write_text(str(os.getpid()))
    cg = SandboxCgroups(f"t1-{uuid.uuid4().hex[:12]}-zygote", box.config.pids, box.config.memory_mb << 20)
    (folder / "cgroups").write_text("".join(f"{d}\n" for d in cg.dirs))
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    env = {**box.config.environ(), **verifier_env()}
    try:
        if os.geteuid() == 0:  # as an episode folder: only host root and the sandbox's root may walk into it
            os.chown(folder, 0, box.HOST_ID_BASE if box._userns else 0)
            os.chmod(folder, 0o710)
        stage(runtime, None, folder / "runtime")  # the runtime may sit where the sandbox's root cannot read it
        argv = _argv(box, folder / "runtime")
        with open(folder / "zygote.log", "wb") as logf:
            popen = dict(stdin=theirs.fileno(), stdout=logf, stderr=logf, env=env, start_new_session=True)
            proc = box._start_bwrap(argv, popen, cg)
    except BaseException:
        ours.close()
        theirs.close()
        cg.destroy()
        shutil.rmtree(folder, ignore_errors=True)
        raise
    theirs.close()
    return Zygote(key, proc, ours, cg, folder)


def _await_ready(z: Zygote) -> None:
    """Wait until ``z`` says ready (it imported pytest and configured its session); ended and an error if it does not."""
    try:
        ok = select.select([z.sock], [], [], READY_TIMEOUT)[0] and z.sock.recv(16) == b"ready"
    except OSError:
        ok = False
    if not ok:
        why = _tail(z.folder / "zygote.log")
        _end(z)
        raise SandboxError(f"the verifier zygote did not start: {why}")


def _end(z: Zygote) -> None:
    try:
        z.sock.close()
    except OSError:
        pass
    _kill(z)
    z.cgroups.destroy()  # and whatever is left in its cgroups
    z.proc.wait()
    shutil.rmtree(z.folder, ignore_errors=True)


def _kill(z: Zygote) -> None:
    if z.proc.poll() is None:
        try:
            os.killpg(z.proc.pid, signal.SIGKILL)  # bwrap (its session leader): the zygote dies with it
        except ProcessLookupError:
            pass


def _verify(box, z: Zygote, opts: VerifierOptions, timeout: float, t0: float) -> ExecResult:
    c = box.config
    prog = seccomp.program()
    spec = {
        "episode": box._root.name,
        "workdir": c.workdir,
        "tests": f"{VERIFIER_DIR}/tests",
        "private": PRIVATE_DIR,
        "home": VERIFIER_HOME,
        "home_files": list(VERIFIER_HOME_FILES),
        "argv": list(opts.args),
        "env": {**c.environ(), **verifier_env(), **opts.env},
        "caps": sorted(CAPS[cap] for cap in box._caps()),
        "seccomp": prog.hex() if prog else "",
    }
    report_r, report_w = os.pipe()
    log_r, log_w = os.pipe()
    try:
        socket.send_fds(z.sock, [json.dumps(spec).encode()], [report_w, log_w])
    finally:
        os.close(report_w)
        os.close(log_w)
    out, err = OutputCapture(box.EXEC_OUTPUT_CAP), OutputCapture(box.EXEC_OUTPUT_CAP)
    readers = {report_r: out, log_r: err}
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while readers:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for fd in select.select(list(readers), [], [], left)[0]:
                data = os.read(fd, 65536)
                if data:
                    readers[fd].feed(data)
                else:
                    del readers[fd]
    finally:
        os.close(report_r)
        os.close(log_r)
    code = -9
    if not timed_out:  # the verifier's pid namespace has ended (every writer of the pipes is gone): its status
        if select.select([z.sock], [], [], box.EXIT_GRACE)[0]:
            answer = z.sock.recv(64)
            code = int(answer.split()[1]) if answer.startswith(b"done ") else -9
    return ExecResult(code, out.bytes(), err.bytes(), timed_out, time.monotonic() - t0)


def _tail(path: Path) -> str:
    try:
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return "no log"
    return lines[-1] if lines else "no output"
