"""Oracles of imported tasks: Terminal-Bench ``solution.sh`` and ``solution.yaml``, Harbor ``solution/solve.sh``.

* ``solution.sh``: the script, verbatim, run by a child ``bash`` (as Terminal-Bench runs it).
* ``solution.yaml``: its keystroke entries typed into the live shell, in order — a ``block: true``
  entry as a command that runs to completion, the others as keys (``append_enter`` adds Enter)
  followed by a wait of ``min_timeout_sec``.
* Harbor ``solve.sh``: ``solution/`` is unpacked to ``/solution`` (as Harbor's oracle uploads it),
  then ``bash /solution/solve.sh`` runs from the workdir with ``[solution] env``. Where ``/`` is
  read-only (the local backend) it is unpacked to ``/tmp/.t1-solution`` instead: a solve.sh that
  reads other files from ``/solution`` then needs the docker backend.

Example:
    >>> from t1env.task import Keystroke
    >>> keystroke_actions((Keystroke("python3", 0.5, False, True), Keystroke("make", 0.1, True, True)), 60)
    [{'keys': ['python3', 'Enter'], 'wait': 0.5}, {'command': 'make', 'timeout': 60}]
"""

from __future__ import annotations

import base64
import io
import shlex
import tarfile

from t1env.task_model import Task


def keystroke_actions(keys, timeout: float) -> list[dict]:
    out: list[dict] = []
    for k in keys:
        if k.block and k.append_enter:
            out.append({"command": k.command, "timeout": timeout})
        else:
            out.append(
                {
                    "keys": [k.command] + (["Enter"] if k.append_enter else []),
                    "wait": max(0.1, min(k.min_timeout_sec, timeout)),
                }
            )
    return out


def solution_command(task: Task) -> str:
    """One shell command that unpacks solution/ to /solution and runs solve.sh there (Harbor's oracle)."""
    o = task.origin
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in sorted(o.solution_dir.rglob("*")):
            if p.is_file():
                tar.add(p, arcname=p.relative_to(o.solution_dir).as_posix(), recursive=False)
    blob = base64.b64encode(buf.getvalue()).decode()
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in o.solution_env.items())
    return (
        f"(d=/solution; rm -rf $d; mkdir -p $d 2>/dev/null || {{ d=/tmp/.t1-solution; rm -rf $d; mkdir -p $d; }}; "
        f"echo {blob} | base64 -d | tar -xzf - -C $d "
        f"&& cd {shlex.quote(task.spec.environment.workdir)} && {('env ' + env + ' ') if env else ''}bash $d/solve.sh)"
    )


def oracle_actions(task: Task, timeout: float) -> list[dict] | None:
    """The oracle's actions for an imported task (or one step of it); None for a t1 task."""
    o = task.origin
    if o is None:
        return None
    if o.keystrokes is not None:
        return keystroke_actions(o.keystrokes, timeout)
    if o.solution_dir is not None:
        return [{"command": solution_command(task), "timeout": timeout}]
    return None  # solution.sh: t1's oracle_command runs the script as it is
