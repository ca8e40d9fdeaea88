"""Lint for answer keys: files a task's ``setup.sh`` leaves outside the workdir that its tests read.

A setup script that records what the checks must know (the pids it started, who owns a lock, a secret the
agent must not learn) in a file under ``/tmp``, ``/var``, ``/root`` or ``/run`` hands the agent the answer and
the power to rewrite it: the agent is root in its sandbox and can read and write every such file before the
checks trust it. The place for that state is ``$T1_PRIVATE``: a folder setup gets, which the host takes out of
the sandbox as soon as setup exits and shows, read-only, to the checks only (``os.environ["T1_PRIVATE"]``;
see ``docs/authoring.md``).

:func:`setup_leftover_problems` (run by ``t1env validate``) starts a sandbox for the task, copies its files,
runs its setup and lists the regular files setup created or changed outside the workdir (and outside the
folders the system changes by itself: ``/proc``, ``/sys``, ``/dev``); each one that a test file names, by its
path or by its folder, is a problem, in one line that says where to write it instead.

Example:
    >>> from t1env.tools.setup_leftovers import setup_leftover_problems
    >>> setup_leftover_problems("hello-file")  # no setup.sh: nothing to look at
    []
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from t1env.env import put_workdir, run_setup
from t1env.registry import get_task
from t1env.sandbox import make_sandbox
from t1env.task import Task

_MARK = "/tmp/.t1-lint-before-setup"
# Where a setup's own leftovers are not the task's (the system's pseudo-files, the marker of this lint).
_PRUNE = ("/proc", "/sys", "/dev", _MARK)
# Folders too general to count as naming a leftover when a test mentions them.
_GENERAL = {
    "/",
    "/tmp",
    "/var",
    "/var/tmp",
    "/var/lib",
    "/var/log",
    "/var/run",
    "/root",
    "/run",
    "/etc",
    "/opt",
    "/srv",
    "/home",
    "/usr",
    "/usr/local",
}


def setup_leftovers(task: Task, backend: str = "local") -> list[str]:
    """Paths of the regular files ``setup.sh`` created or changed outside the workdir, as the sandbox sees them
    (sorted; empty when the task has no setup)."""
    if task.setup_script is None:
        return []
    box = make_sandbox(backend, task)
    try:
        box.start()
        put_workdir(task, box)
        box.exec(["sh", "-c", f": > {_MARK}"], timeout=30)
        run_setup(task, box)
        prune = [*_PRUNE, box.config.workdir]
        expr = " -o ".join(f"-path '{p}'" for p in prune)
        # -cnewer: a file's status change time, which `touch -d` cannot set into the past
        r = box.exec(
            ["sh", "-c", f"find / \\( {expr} \\) -prune -o -type f -cnewer {_MARK} -print 2>/dev/null"], timeout=120
        )
    finally:
        box.stop()
    return sorted({line for line in r.stdout.decode(errors="replace").splitlines() if line.startswith("/")})


def setup_leftover_problems(task_ref: str | Path | Task, backend: str = "local") -> list[str]:
    """One line per file that ``setup.sh`` leaves outside the workdir and the task's tests read (see the module
    docstring); empty when there is none."""
    task = task_ref if isinstance(task_ref, Task) else get_task(task_ref)
    if task.setup_script is None:
        return []
    tests = {p.name: p.read_text(errors="replace") for p in sorted(task.tests_dir.rglob("*.py"))}
    problems = []
    for path in setup_leftovers(task, backend):
        folder = str(PurePosixPath(path).parent)
        names = [path] + ([folder] if folder not in _GENERAL else [])
        readers = [name for name, text in tests.items() if any(n in text for n in names)]
        if readers:
            problems.append(
                f"{task.setup_script}: leaves {path} outside the workdir, and tests/{readers[0]} reads it: the agent "
                'can read and rewrite it; write it to "$T1_PRIVATE/" instead and read it there in the tests '
                '(os.environ["T1_PRIVATE"]), where only the checks see it'
            )
    return problems
