"""Per-sandbox cgroups that cap the number of processes (``pids``) and memory, on cgroup v1 or v2.

cgroup v1 (one hierarchy per controller): the sandbox gets a directory under this process's own
cgroup in the ``pids`` and in the ``memory`` hierarchy.

cgroup v2 (one unified hierarchy): a cgroup only offers a controller to its children once the
controller is listed in its ``cgroup.subtree_control``, and the kernel refuses that write while the
cgroup itself holds processes (the "no internal processes" rule; the root cgroup is exempt). So the
sandbox cgroups go under this process's own cgroup ``P``: when ``P`` does not hand out ``pids`` and
``memory`` yet, this process first moves itself into a leaf ``P/t1-host-<pid>``, then writes
``+pids +memory`` to ``P/cgroup.subtree_control``. That works when the process owns ``P`` (a
systemd service or scope with ``Delegate=yes``, a container whose cgroup it runs alone in, a root
shell in a cgroup of its own). When another process shares ``P`` or the controller is not
delegated to ``P``, the limit is not enforced, and :attr:`SandboxCgroups.missing` says why. The
leaf, once made, is kept for the life of the process (a process cannot remove the cgroup it is
in); it is empty and harmless afterwards.

Every write is best effort: a limit counts as enforced only when its file took the value.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Iterable

CONTROLLERS = ("pids", "memory")


class SandboxCgroups:
    """The cgroup directories of one sandbox. See the module docstring.

    Attributes:
        enforced: controller -> whether its limit is in force.
        missing: controller -> why its limit is not in force (empty when all are).
        dirs: the directories made (one per v1 hierarchy, one in total on v2).
    """

    ROOT = Path("/sys/fs/cgroup")
    PROC_SELF_CGROUP = Path("/proc/self/cgroup")
    _v2_parents: dict[tuple[Path, str], tuple[Path | None, set[str], str]] = {}
    _v2_lock = threading.Lock()

    def __init__(self, name: str, pids: int, memory_bytes: int):
        self.dirs: list[Path] = []
        self.enforced: dict[str, bool] = {c: False for c in CONTROLLERS}
        self.missing: dict[str, str] = {}
        own = self._own_paths()
        if (self.ROOT / "cgroup.controllers").exists():
            self._setup_v2(own.get("", "/"), name, pids, memory_bytes)
        else:
            self._setup_v1(own, name, pids, memory_bytes)
        for c in CONTROLLERS:
            if not self.enforced[c]:
                self.missing.setdefault(c, f"no writable {c} cgroup under {self.ROOT}")
        self._procs_files = [str(d / "cgroup.procs").encode() for d in self.dirs]

    # -- setup -------------------------------------------------------------------------------
    def _setup_v1(self, own: dict[str, str], name: str, pids: int, memory_bytes: int) -> None:
        limits = (("pids", "pids.max", str(pids)), ("memory", "memory.limit_in_bytes", str(memory_bytes)))
        for ctrl, fname, value in limits:
            d = self._mkdir(self.ROOT / ctrl / own.get(ctrl, "/").lstrip("/") / name)
            if d is not None:
                self.enforced[ctrl] = self._write(d / fname, value)
                if ctrl == "memory":  # also cap swap, where the kernel accounts it
                    self._write(d / "memory.memsw.limit_in_bytes", value)

    def _setup_v2(self, own: str, name: str, pids: int, memory_bytes: int) -> None:
        key = (self.ROOT, own)
        with self._v2_lock:  # moving this process into its leaf happens once per process
            if key not in self._v2_parents:
                self._v2_parents[key] = self._v2_parent(own)
            parent, handed_out, why = self._v2_parents[key]
        for c in CONTROLLERS:
            if c not in handed_out:
                self.missing[c] = why or f"{parent} does not hand out the {c} controller"
        if parent is None or not handed_out:
            return
        d = self._mkdir(parent / name)
        if d is None:
            self.missing = {c: f"cannot create a cgroup under {parent}" for c in CONTROLLERS}
            return
        if "pids" in handed_out:
            self.enforced["pids"] = self._write(d / "pids.max", str(pids))
        if "memory" in handed_out:
            self.enforced["memory"] = self._write(d / "memory.max", str(memory_bytes))
            self._write(d / "memory.swap.max", "0")

    def _v2_parent(self, own: str) -> tuple[Path | None, set[str], str]:
        """Where sandbox cgroups go on v2, which of CONTROLLERS it hands out, and why not the rest."""
        parent = self.ROOT / own.lstrip("/")
        available = set(self._read(parent / "cgroup.controllers").split())
        wanted = [c for c in CONTROLLERS if c in available]
        if not wanted:
            return None, set(), f"the pids and memory controllers are not delegated to {parent}"
        handed_out = set(self._read(parent / "cgroup.subtree_control").split())
        todo = [c for c in wanted if c not in handed_out]
        if todo:
            line = " ".join(f"+{c}" for c in todo)
            if not self._write(parent / "cgroup.subtree_control", line):
                # "no internal processes": move this process out of the way, into a leaf of its own
                leaf = parent / f"t1-host-{os.getpid()}"
                if not leaf.is_dir() and not self._new_cgroup(leaf):
                    return None, set(), f"cannot create a cgroup under {parent}"
                moved = self._write(leaf / "cgroup.procs", str(os.getpid()))
                if not (moved and self._write(parent / "cgroup.subtree_control", line)):
                    if moved:  # undo: other processes live in the parent, so the leaf does not help
                        self._write(parent / "cgroup.procs", str(os.getpid()))
                    self._remove_cgroup(leaf)
                    return (
                        None,
                        set(),
                        (
                            f"cannot enable {line} in {parent}/cgroup.subtree_control (other processes share "
                            f"{parent}); run t1 in a cgroup of its own, e.g. `systemd-run --scope -p Delegate=yes ...`"
                        ),
                    )
            handed_out = set(self._read(parent / "cgroup.subtree_control").split())
        return parent, {c for c in wanted if c in handed_out}, ""

    def _own_paths(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for line in self._read(self.PROC_SELF_CGROUP).splitlines():
            try:
                _, ctrls, path = line.split(":", 2)
            except ValueError:
                continue
            for c in ctrls.split(","):
                out[c] = path
        return out

    def _mkdir(self, d: Path) -> Path | None:
        if not self._new_cgroup(d):
            return None
        self.dirs.append(d)
        return d

    @staticmethod
    def _new_cgroup(d: Path) -> bool:
        try:
            d.mkdir()
            return True
        except OSError:
            return False

    @staticmethod
    def _remove_cgroup(d: Path) -> bool:
        try:
            d.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            return False

    @staticmethod
    def _read(p: Path) -> str:
        try:
            return p.read_text()
        except OSError:
            return ""

    @staticmethod
    def _write(p: Path, value: str) -> bool:
        """Write an existing cgroup file (never create one: a missing file is a missing controller)."""
        try:
            fd = os.open(p, os.O_WRONLY)
        except OSError:
            return False
        try:
            os.write(fd, value.encode())
            return True
        except OSError:
            return False
        finally:
            os.close(fd)

    # -- use ---------------------------------------------------------------------------------
    def join_self(self) -> None:
        """Move the calling process into every cgroup (safe to call between fork and exec)."""
        pid = str(os.getpid()).encode()
        for f in self._procs_files:
            try:
                fd = os.open(f, os.O_WRONLY)
                try:
                    os.write(fd, pid)
                finally:
                    os.close(fd)
            except OSError:
                pass

    def pids(self) -> set[int]:
        out: set[int] = set()
        for d in self.dirs:
            out.update(int(x) for x in self._read(d / "cgroup.procs").split())
        return out

    def oom_kills(self) -> int | None:
        """Processes the out-of-memory killer ended in the memory cgroup (None: no memory cgroup or no counter)."""
        return oom_kill_count(self._read(d / f) for d in self.dirs for f in ("memory.oom_control", "memory.events"))

    def destroy(self) -> None:
        """Kill every process in the cgroups, then remove them."""
        remove_cgroups(self.dirs)
        self.dirs = []


def oom_kill_count(texts: Iterable[str]) -> int | None:
    """The ``oom_kill N`` counter of the first of ``texts`` (a v1 ``memory.oom_control`` or v2 ``memory.events``)
    that has one."""
    for text in texts:
        m = re.search(r"^oom_kill (\d+)$", text, re.M)
        if m:
            return int(m.group(1))
    return None


def remove_cgroups(dirs: list[Path]) -> None:
    """Kill every process in ``dirs`` (cgroups), then remove them (also for ``t1env gc``: a dead process's)."""
    read, write = SandboxCgroups._read, SandboxCgroups._write
    for d in dirs:
        write(d / "cgroup.kill", "1")  # v2, Linux >= 5.14: one write kills all
    deadline = time.monotonic() + 5
    while True:
        live = {int(x) for d in dirs for x in read(d / "cgroup.procs").split()}
        if not live or time.monotonic() > deadline:
            break
        for pid in live:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.005)
    for d in reversed(dirs):
        for _ in range(200):  # the kernel may need a moment after the last process is gone
            if SandboxCgroups._remove_cgroup(d):
                break
            time.sleep(0.005)
