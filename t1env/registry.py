"""Finding task packages: built-in ones, extra directories, and pip-installed task packages.

Sources, in order (an id found twice is an error that names both folders):

1. the built-in corpus (``tasks/`` in a checkout, shipped inside the wheel when installed);
2. directories given by the ``task_dirs`` argument and by the ``T1ENV_TASK_PATH`` environment
   variable (``os.pathsep``-separated);
3. installed distributions that declare an entry point in the group ``t1env.tasks``; the entry
   point names a module attribute holding a path (str or Path) or a zero-argument callable
   returning one. The path is a task package or a folder of task packages. Example, in the task
   package's ``pyproject.toml``::

       [project.entry-points."t1env.tasks"]
       my_tasks = "my_tasks:TASKS_DIR"

A directory holding ``task.toml`` (or a Terminal-Bench ``task.yaml``) is one task; otherwise each of
its sub-folders holding one is. The task id is the folder name. Terminal-Bench and Harbor folders
are read by :mod:`t1env.formats`.

Splits: every task is in ``train`` or ``test`` by a stable hash of its id (one in five is
``test``), so splits never change when tasks are added. Imported benchmark tasks (canary string,
benchmark org, ``.t1-eval-only`` marker: :mod:`t1env.formats`) are always ``test``, and
:func:`training_tasks` refuses them.

Family instances (``logs@17``, see :mod:`t1env.families`) are resolved by :func:`get_task` too;
they are generated on first use and never listed by :func:`list_tasks` (there are unboundedly many).
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Iterable

from t1env.families import materialize, parse_instance_id
from t1env.formats import EVAL_ONLY_MARKER
from t1env.resources import data_dir
from t1env.task import Task, TaskError, is_task_package, load_task, manifest

ENTRY_POINT_GROUP = "t1env.tasks"
PATH_ENV = "T1ENV_TASK_PATH"
SPLITS = ("train", "test")


def builtin_tasks_dir() -> Path:
    return data_dir("tasks")


def _packages_in(d: Path) -> list[Path]:
    if is_task_package(d):
        return [d]
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.is_dir() and is_task_package(p))


def _entry_point_dirs() -> list[Path]:
    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            path = obj() if callable(obj) else obj
        except Exception as e:  # a broken third-party package must not hide the others
            raise TaskError(f"entry point {ENTRY_POINT_GROUP}:{ep.name} ({ep.value}): failed to load: {e}") from None
        out.append(Path(path))
    return out


def search_path(task_dirs: Iterable[str | Path] | None = None) -> list[Path]:
    dirs = [builtin_tasks_dir()]
    dirs += [Path(d) for d in (task_dirs or [])]
    dirs += [Path(d) for d in os.environ.get(PATH_ENV, "").split(os.pathsep) if d]
    dirs += _entry_point_dirs()
    return dirs


def discover(task_dirs: Iterable[str | Path] | None = None) -> dict[str, Path]:
    """Map task id → package folder over every source (not parsed yet: cheap)."""
    found: dict[str, Path] = {}
    for d in search_path(task_dirs):
        for pkg in _packages_in(d):
            tid = pkg.name
            if tid in found and found[tid].resolve() != pkg.resolve():
                raise TaskError(f"{pkg}: task id {tid!r} is also defined at {found[tid]}; rename one folder")
            found[tid] = pkg
    return found


def split_of(task_id: str, task_dirs: Iterable[str | Path] | None = None, pkg: Path | None = None) -> str:
    """``train`` or ``test``: a stable hash of the id; an eval-only (imported benchmark) task is always ``test``."""
    if eval_only(pkg if pkg is not None else task_id, task_dirs):
        return "test"
    return "test" if int(hashlib.sha256(task_id.encode()).hexdigest(), 16) % 5 == 0 else "train"


def eval_only(task: str | Path, task_dirs: Iterable[str | Path] | None = None) -> str | None:
    """Why a task (id or package folder) is evaluation-only (an imported benchmark task), or None."""
    pkg = Path(task) if is_task_package(Path(task)) else discover(task_dirs).get(str(task))
    if pkg is None:
        return None
    if (pkg / EVAL_ONLY_MARKER).exists():
        return f"marked eval-only by {EVAL_ONLY_MARKER}"
    toml = pkg / "task.toml"
    if toml.is_file() and b"\nid =" in b"\n" + toml.read_bytes():
        return None  # a t1 package: eval-only only by the marker
    t = get_task(pkg)
    return t.origin.eval_only if t.origin is not None else None


def training_tasks(task_ids: Iterable[str], task_dirs: Iterable[str | Path] | None = None) -> list[str]:
    """``task_ids`` checked for a training split: an eval-only task among them is an error naming it and why."""
    ids = list(task_ids)
    for tid in ids:
        why = eval_only(tid, task_dirs)
        if why:
            raise TaskError(f"{tid}: an imported benchmark task is eval-only ({why}); it cannot be in a training split")
    return ids


@lru_cache(maxsize=1024)
def _load_cached(path: str, mtime: float) -> Task:
    return load_task(path)


def get_task(task_id_or_path: str | Path, task_dirs: Iterable[str | Path] | None = None) -> Task:
    """A task by id (from any source), by a path to its folder, or a family instance ``NAME@SEED``."""
    p = Path(task_id_or_path)
    if is_task_package(p):
        return _load_cached(str(p.resolve()), manifest(p).stat().st_mtime)
    instance = parse_instance_id(str(task_id_or_path))
    if instance is not None:
        pkg = materialize(*instance)
        return _load_cached(str(pkg), manifest(pkg).stat().st_mtime)
    found = discover(task_dirs)
    if str(task_id_or_path) not in found:
        raise TaskError(f"unknown task {str(task_id_or_path)!r}; `t1env list` shows the {len(found)} known tasks")
    pkg = found[str(task_id_or_path)]
    return _load_cached(str(pkg.resolve()), manifest(pkg).stat().st_mtime)


def list_tasks(split: str | None = None, task_dirs: Iterable[str | Path] | None = None) -> list[str]:
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS} or None, got {split!r}")
    found = discover(task_dirs)
    return [t for t in sorted(found) if split is None or split_of(t, pkg=found[t]) == split]
