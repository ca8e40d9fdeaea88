"""Freeze every process of a local sandbox while its shared-mode verifier starts.

In ``shared`` verification mode the agent's processes keep running beside the verifier. The
verifier makes itself non-dumpable as its first act, after which no agent process can open its
``/proc/<pid>/fd`` entries, read its memory or attach to it; :class:`Freezer` closes the instant
before that: the host freezes the sandbox's processes, starts the verifier, waits for its first
report line, and thaws them.

Mechanisms, best first: the cgroup v1 ``freezer`` controller (a cgroup of the sandbox's own that
its processes are moved into), cgroup v2's ``cgroup.freeze`` on the sandbox's cgroup, and, where
neither is available, ``SIGSTOP``/``SIGCONT`` of each process (processes the agent had stopped
itself stay stopped). :attr:`Freezer.mechanism` says which one was used.

The sandbox's processes are found by their pid namespace (``/proc/<pid>/ns/pid``), so nothing the
agent does to its cgroups or process names hides one.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

from t1env.sandbox.cgroups import SandboxCgroups

CGROUP_ROOT = Path("/sys/fs/cgroup")
_read, _write = SandboxCgroups._read, SandboxCgroups._write  # best-effort cgroup file access


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


class Freezer:
    """Freezes the processes of the pid namespace of ``init_pid`` (see the module docstring).

    Args:
        init_pid: host pid of any process in the sandbox's pid namespace (its pid 1).
        v2_cgroup: the sandbox's own cgroup on a cgroup v2 host (holding only its processes), if any.
    """

    def __init__(self, init_pid: int, v2_cgroup: Path | None = None):
        self.init_pid = init_pid
        self.v2_cgroup = v2_cgroup
        self.mechanism = "none"
        self._v1: Path | None = None
        self._v1_parent: Path | None = None
        self._stopped: set[int] = set()

    # -- freeze ------------------------------------------------------------------------------
    def freeze(self, timeout: float = 5.0) -> str:
        """Freeze every process of the sandbox; returns the mechanism used."""
        deadline = time.monotonic() + timeout
        if self._freeze_v1(deadline):
            self.mechanism = "cgroup v1 freezer"
        elif self._freeze_v2(deadline):
            self.mechanism = "cgroup v2 cgroup.freeze"
        else:
            self._sigstop(deadline)
            self.mechanism = "SIGSTOP"
        return self.mechanism

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

    def _sigstop(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            todo = [p for p in pids_in_namespace(self.init_pid) if p not in self._stopped and _state(p) not in ("T", "t", "Z", "")]
            if not todo:
                return
            for pid in todo:
                try:
                    os.kill(pid, signal.SIGSTOP)
                    self._stopped.add(pid)
                except OSError:
                    pass

    # -- thaw --------------------------------------------------------------------------------
    def thaw(self) -> None:
        """Undo :meth:`freeze` (idempotent)."""
        if self._v1 is not None:
            _write(self._v1 / "freezer.state", "THAWED")
            self._drop_v1()
        if self.mechanism == "cgroup v2 cgroup.freeze" and self.v2_cgroup is not None:
            _write(self.v2_cgroup / "cgroup.freeze", "0")
        for pid in self._stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        self._stopped = set()

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
