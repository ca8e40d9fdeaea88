"""What a process's episodes leave behind: a count of every kind of resource an env can leak.

A training or evaluation run opens and closes thousands of episodes in one process. Each one starts
processes (a sandbox, a shell, ``docker exec`` clients), makes a folder, cgroups or a container
with its volumes, and uses file descriptors and threads of the driving process. :func:`snapshot`
counts all of them for the calling process, so two snapshots — before a run and after every env
was closed — say what leaked (:meth:`Snapshot.leaks`). ``bench/soak.py`` prints them as a table and
``tests/t1env/test_soak.py`` asserts that nothing leaks.

What is counted, and how it is attributed to this process:

* **processes** and **zombies** in this process's tree (its descendants, read from ``/proc``);
* **cgroup processes**: processes in this process's cgroups other than itself. Local sandbox
  processes live in cgroups made under this process's own, so one that left the tree (reparented
  when its parent died) is still counted. Attributable only when the process has cgroups of its
  own: :func:`own_cgroups` gives it some (cgroup v1); otherwise ``None``;
* **cgroups**: ``t1-*`` cgroups (sandbox caps, freezers) below this process's cgroups;
* **temp dirs**: local episode folders (``t1-sbx-*``) whose ``owner`` file names this process, or
  every entry of a temp folder the caller made for the run;
* **containers**: Docker containers whose owner label is this process's (``t1env.owner``);
* **volumes**: of the volume names the caller saw mounted in its containers
  (:func:`container_volumes`), how many still exist (anonymous volumes carry no label);
* **fds** (less the idle connections the Docker SDK pools: bounded, see :func:`docker_pooled_fds`),
  **threads** (native, from ``/proc/self/task``) and the resident set size of this process.

What leaked is what a snapshot holds that the one before did not (:meth:`Snapshot.leaks`), by
identity, not by count: each snapshot keeps the fds (number and target), thread ids, processes
(pid and start time), folders, cgroups, containers and volumes it saw. Something released in
between (an fd another thread closed, a child someone reaped) is not a leak and
cannot cancel one; a count difference would be ``-1`` there and hide a real leak elsewhere. What
other threads open in between does count, so measure in a process that runs nothing else (the
soak does, in a process of its own).

Machine-wide numbers (all processes, all zombies) are recorded too, for context only: other
programs on the machine change them.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Iterable, Iterator

from t1env.sandbox.docker_engine import _OWNER, LABEL_OWNER, client
from t1env.sandbox.local import EPISODE_PREFIX

CGROUP_ROOT = Path("/sys/fs/cgroup")
# The v1 hierarchies t1 makes cgroups in (t1env.sandbox.cgroups: pids, memory; t1env.sandbox.freezer: freezer).
V1_HIERARCHIES = ("pids", "memory", "freezer")
CGROUP_PREFIX = "t1-"
V2_HOST_LEAF = "t1-host-"  # the leaf a process moves itself into on cgroup v2 (kept for its life: not a leak)


@dataclass(frozen=True)
class Snapshot:
    """Counts of what this process holds. ``None``: not measurable here (no Docker, no own cgroups)."""

    processes: int
    """Descendants of this process (zombies included)."""
    zombies: int
    """Zombies among them (a zombie anywhere else is not this process's to reap)."""
    cgroup_processes: int | None
    """Processes in this process's own cgroups, itself excluded (see :func:`own_cgroups`)."""
    cgroups: int | None
    """``t1-*`` cgroups below this process's cgroups."""
    temp_dirs: int
    """Episode folders of this process (or entries of the run's own temp folder)."""
    containers: int | None
    """Docker containers labelled as this process's."""
    volumes: int | None
    """Watched Docker volumes that still exist."""
    fds: int
    """Open file descriptors of this process, less ``docker_pooled_fds``."""
    docker_pooled_fds: int | None
    """Idle connections the Docker SDK keeps in its connection pools: bounded (docker-py keeps a pool per
    request URL, at most 25 pools of at most 10 connections), not a leak."""
    threads: int
    """Threads of this process."""
    rss_mb: float
    """Resident set size of this process, MiB (not a leak count: see the RSS curve)."""
    machine_processes: int
    """Every process on the machine (context: other programs change it)."""
    machine_zombies: int
    """Every zombie on the machine (context: on hosts whose pid 1 does not reap, orphans' zombies stay)."""
    held: dict[str, frozenset] = field(default_factory=dict, compare=False, repr=False)
    """``{kind: identities}`` behind each leak count (fd and target, thread id, pid and start time, name...)."""

    LEAK_KINDS = (
        "processes",
        "zombies",
        "cgroup_processes",
        "cgroups",
        "temp_dirs",
        "containers",
        "volumes",
        "fds",
        "threads",
    )

    def leaks(self, before: Snapshot) -> dict[str, int]:
        """``{kind: n}`` for every leak kind measurable in both: how many things of that kind this snapshot holds
        that ``before`` did not (0 everywhere: nothing leaked). Never negative: what was released in between
        does not count (see the module docstring)."""
        out = {}
        for k in self.LEAK_KINDS:
            a, b = self.held.get(k), before.held.get(k)
            if a is not None and b is not None:
                out[k] = len(a - b)
        return out

    def as_dict(self) -> dict:
        """The counts (not the identities behind them)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "held"}


def snapshot(
    temp_root: str | Path | None = None,
    private_temp: bool = False,
    docker: bool = False,
    volumes: Iterable[str] = (),
) -> Snapshot:
    """Count what this process holds now (see the module docstring).

    Args:
        temp_root: where episode folders are made (default: ``tempfile.gettempdir()``).
        private_temp: ``temp_root`` is the run's own folder: count every entry in it.
        docker: count Docker containers and ``volumes`` (needs the docker SDK and an engine).
        volumes: volume names to look for (from :func:`container_volumes`).
    """
    me = os.getpid()
    table = _process_table()
    tree = descendants(me, table)
    held: dict[str, frozenset] = {
        "processes": frozenset((p, table[p][3]) for p in tree),
        "zombies": frozenset((p, table[p][3]) for p in tree if table[p][1] == "Z"),
        "temp_dirs": frozenset(temp_dir_names(temp_root, private_temp)),
        "threads": frozenset(thread_ids()),
    }
    dirs = own_cgroup_dirs()
    if dirs:
        held["cgroups"] = frozenset(str(d) for d in own_t1_cgroups(dirs))
    if dirs and all(_is_isolated(d) for d in dirs):
        held["cgroup_processes"] = frozenset(cgroup_pids(dirs) - {me})
    pooled: set[int] = set()
    if docker:
        held["containers"], held["volumes"] = _docker_held(set(volumes))
        pooled = docker_pooled_fd_numbers()
    held["fds"] = frozenset((fd, target) for fd, target in open_fds().items() if fd not in pooled)

    def count(kind: str) -> int | None:
        return len(held[kind]) if kind in held else None

    return Snapshot(
        processes=count("processes"),
        zombies=count("zombies"),
        cgroup_processes=count("cgroup_processes"),
        cgroups=count("cgroups"),
        temp_dirs=count("temp_dirs"),
        containers=count("containers"),
        volumes=count("volumes"),
        fds=count("fds"),
        docker_pooled_fds=len(pooled) if docker else None,
        threads=count("threads"),
        rss_mb=rss_mb(),
        machine_processes=len(table),
        machine_zombies=sum(1 for _, state, _, _ in table.values() if state == "Z"),
        held=held,
    )


# -- processes --------------------------------------------------------------------------------


def _process_table() -> dict[int, tuple[int, str, str, int]]:
    """``{pid: (ppid, state, comm, start time)}`` of every process on the machine (the start time, in clock ticks
    since boot, tells a process from a later one that got its pid)."""
    out: dict[int, tuple[int, str, str, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:  # ended while we looked
            continue
        comm = text[text.find("(") + 1 : text.rfind(")")]
        rest = text[text.rfind(")") + 2 :].split()
        out[int(name)] = (int(rest[1]), rest[0], comm, int(rest[19]))
    return out


def process_table() -> dict[int, tuple[int, str, str]]:
    """``{pid: (ppid, state, comm)}`` of every process on the machine."""
    return {pid: row[:3] for pid, row in _process_table().items()}


def descendants(pid: int, table: dict[int, tuple] | None = None) -> set[int]:
    """Every process below ``pid`` (children, their children, ...)."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for p, (ppid, *_) in table.items():
        children.setdefault(ppid, []).append(p)
    out: set[int] = set()
    todo = list(children.get(pid, ()))
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo.extend(children.get(p, ()))
    return out


def open_fds() -> dict[int, str]:
    """``{fd: target}`` of this process's open file descriptors (``pipe:[123]``, ``/dev/null``...)."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the one listdir read the folder with, closed by now (or another thread's, just closed)
            pass
    return out


def count_fds() -> int:
    return len(open_fds())


def thread_ids() -> list[int]:
    """Native ids of this process's threads."""
    return [int(t) for t in os.listdir("/proc/self/task")]


def _status(field: str) -> str:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
    return "0"


def count_threads() -> int:
    return int(_status("Threads"))


def rss_mb() -> float:
    return int(_status("VmRSS").split()[0]) / 1024


def peak_rss_mb() -> float:
    """The most this process was resident since it started or since :func:`reset_peak_rss` (``VmHWM``), MiB."""
    return int(_status("VmHWM").split()[0]) / 1024


def trimmed_rss_mb() -> float:
    """RSS after glibc's ``malloc_trim(0)`` has returned free heap pages to the kernel, MiB: what an RSS that
    is higher than at the start holds in live memory rather than in free, fragmented heap (same as
    :func:`rss_mb` where there is no glibc)."""
    import ctypes
    import ctypes.util

    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    return rss_mb()


def reset_peak_rss() -> bool:
    """Start :func:`peak_rss_mb` again from the current RSS (Linux >= 4.0); False where the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


# -- temp dirs --------------------------------------------------------------------------------


def temp_dir_names(root: str | Path | None = None, private: bool = False) -> list[str]:
    """Episode folders of this process in ``root`` (every entry, when ``root`` is the run's own)."""
    root = Path(root or tempfile.gettempdir())
    if private:
        return os.listdir(root)
    out, me = [], str(os.getpid())
    for d in root.glob(f"{EPISODE_PREFIX}*"):
        try:
            if (d / "owner").read_text() == me:
                out.append(d.name)
        except OSError:  # being made or removed, or not readable: not attributable
            pass
    return out


def count_temp_dirs(root: str | Path | None = None, private: bool = False) -> int:
    return len(temp_dir_names(root, private))


# -- cgroups ----------------------------------------------------------------------------------


def _own_paths() -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for c in parts[1].split(","):
                out[c] = parts[2]
    return out


def own_cgroup_dirs() -> list[Path]:
    """This process's cgroup directories where t1 makes cgroups (v1: pids, memory, freezer; v2: the unified one)."""
    own = _own_paths()
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        d = CGROUP_ROOT / own.get("", "/").lstrip("/")
        if d.name.startswith(V2_HOST_LEAF):  # sandboxes go beside the leaf, in its parent
            d = d.parent
        return [d] if d.is_dir() else []
    return [CGROUP_ROOT / h / own[h].lstrip("/") for h in V1_HIERARCHIES if h in own and (CGROUP_ROOT / h).is_dir()]


def _is_isolated(d: Path) -> bool:
    """Whether ``d`` is a cgroup of this run's own (made by :func:`own_cgroups`), not one shared with others."""
    return d.name.startswith(OWN_CGROUP_PREFIX)


def _walk(d: Path) -> Iterator[Path]:
    try:
        subs = [e for e in os.scandir(d) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return
    for e in subs:
        yield Path(e.path)
        yield from _walk(Path(e.path))


def own_t1_cgroups(dirs: Iterable[Path]) -> list[Path]:
    """``t1-*`` cgroups below ``dirs`` (v2's kept host leaf excluded)."""
    return [
        sub
        for d in dirs
        for sub in _walk(d)
        if sub.name.startswith(CGROUP_PREFIX) and not sub.name.startswith(V2_HOST_LEAF)
    ]


def count_cgroups(dirs: Iterable[Path]) -> int:
    return len(own_t1_cgroups(dirs))


def cgroup_pids(dirs: Iterable[Path]) -> set[int]:
    """Every process in ``dirs`` and the cgroups below them."""
    out: set[int] = set()
    for d in dirs:
        for sub in [d, *_walk(d)]:
            try:
                out.update(int(x) for x in (sub / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
    return out


OWN_CGROUP_PREFIX = "t1-run-"


@contextlib.contextmanager
def own_cgroups() -> Iterator[bool]:
    """Run this process (and what it starts) in cgroups of its own, so that cgroups and processes its
    sandboxes leave behind are attributable to it even where other programs share its cgroups.

    cgroup v1 only (one ``t1-run-<pid>`` per hierarchy in :data:`V1_HIERARCHIES`, needs root); yields
    whether it worked. On exit the process moves back and the cgroups are removed (a cgroup that
    still holds processes stays, and is itself a leak).
    """
    if (CGROUP_ROOT / "cgroup.controllers").exists() or os.geteuid() != 0:
        yield False
        return
    own = _own_paths()
    made: list[tuple[Path, Path]] = []  # (parent, ours)
    pid = str(os.getpid())
    try:
        for h in V1_HIERARCHIES:
            if h not in own or not (CGROUP_ROOT / h).is_dir():
                continue
            parent = CGROUP_ROOT / h / own[h].lstrip("/")
            d = parent / f"{OWN_CGROUP_PREFIX}{pid}"
            d.mkdir(exist_ok=True)
            made.append((parent, d))
            (d / "cgroup.procs").write_text(pid)
        ok = bool(made)
    except OSError:
        ok = False
    try:
        yield ok
    finally:
        for parent, d in made:
            try:
                (parent / "cgroup.procs").write_text(pid)
                d.rmdir()
            except OSError:
                pass


# -- Docker -----------------------------------------------------------------------------------


def _docker_held(volumes: set[str]) -> tuple[frozenset, frozenset]:
    """Ids of this process's containers, and which of ``volumes`` still exist."""
    api = client().api
    containers = api.containers(all=True, filters={"label": f"{LABEL_OWNER}={_OWNER}"})
    existing = {v["Name"] for v in (api.volumes().get("Volumes") or [])}
    return frozenset(c["Id"] for c in containers), frozenset(volumes & existing)


def docker_pooled_fd_numbers() -> set[int]:
    """The fds of the sockets the Docker SDK's client holds idle in its connection pools (none where its
    internals differ)."""
    out: set[int] = set()
    try:
        for adapter in set(client().api.adapters.values()):
            pools = getattr(adapter, "pools", None)
            if pools is None:
                continue
            for key in list(pools.keys()):
                pool = pools.get(key)
                for conn in list(getattr(getattr(pool, "pool", None), "queue", None) or []):
                    sock = getattr(conn, "sock", None) if conn is not None else None
                    if sock is not None and sock.fileno() >= 0:
                        out.add(sock.fileno())
    except Exception:  # the SDK's private pool layout changed: count every socket as the process's own
        return set()
    return out


def docker_pooled_fds() -> int:
    """How many sockets the Docker SDK's client holds idle in its connection pools."""
    return len(docker_pooled_fd_numbers())


def container_volumes(container_ids: Iterable[str] | None = None) -> set[str]:
    """Names of the volumes mounted in ``container_ids`` (default: every container of this process)."""
    api = client().api
    out: set[str] = set()
    if container_ids is None:
        for c in api.containers(all=True, filters={"label": f"{LABEL_OWNER}={_OWNER}"}):
            out.update(m["Name"] for m in c.get("Mounts") or [] if m.get("Type") == "volume" and m.get("Name"))
        return out
    for cid in container_ids:
        try:
            mounts = api.inspect_container(cid).get("Mounts") or []
        except Exception:  # already removed
            continue
        out.update(m["Name"] for m in mounts if m.get("Type") == "volume" and m.get("Name"))
    return out


__all__ = [
    "Snapshot",
    "container_volumes",
    "descendants",
    "own_cgroups",
    "peak_rss_mb",
    "process_table",
    "reset_peak_rss",
    "trimmed_rss_mb",
    "rss_mb",
    "snapshot",
]
