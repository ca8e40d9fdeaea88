"""Staging for the local backend's verifiers: host folders a verifier's sandbox binds read-only.

What is staged belongs to host root (the sandbox's root may read it, never write it), and is staged only once no
agent process can watch it fill (``separate`` mode: after they all ended; ``shared``: while they are frozen)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from t1env.sandbox.base import VERIFIER_HOME_FILES


def stage_episode(dest: Path, tests: Path, private: Path | None) -> None:
    """What a zygote's verifier binds from the episode folder's ``dest`` (``prepared/``): the tests, the private
    state (or an empty folder) and the checks' HOME files, readable (not writable) by the sandbox's root."""
    clear(dest)
    dest.mkdir(exist_ok=True)
    (dest / "tests").mkdir()
    copy_tree(tests, dest / "tests", code=True)
    (dest / "private").mkdir()
    if private is not None:
        copy_tree(private, dest / "private")
    (dest / "home").mkdir()
    for f in VERIFIER_HOME_FILES:
        (dest / "home" / f).touch()
    make_readable(dest)


def stage(runtime: Path, tests: Path | None, dest: Path, private: Path | None = None) -> None:
    """Copy the runtime and the tests (None: an empty ``tests/``) into ``dest``, readable (not writable) by the
    sandbox's root, with ``home`` (the shared-mode verifier's HOME, holding :data:`VERIFIER_HOME_FILES`, which the
    separate-mode verifier's tmpfs HOME binds) and ``private`` (a copy of ``private``, the task's private setup
    state, in shared mode, where nothing can be mounted for the verifier alone; else empty)."""
    clear(dest)
    dest.mkdir(exist_ok=True)
    copy_tree(runtime, dest)
    (dest / "tests").mkdir(exist_ok=True)
    if tests is not None:
        copy_tree(tests, dest / "tests", code=True)
    (dest / "private").mkdir(exist_ok=True)
    if private is not None:
        copy_tree(private, dest / "private")
    (dest / "home").mkdir(exist_ok=True)
    for f in VERIFIER_HOME_FILES:
        (dest / "home" / f).touch()
    make_readable(dest)


def copy_tree(src: Path, dest: Path, code: bool = False) -> None:
    """Copy the tree ``src`` into ``dest``; ``code``: without bytecode caches (the tests: pytest compiles them)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc") if code else None
    try:
        shutil.copytree(src, dest, dirs_exist_ok=True, symlinks=False, ignore=ignore)
    except shutil.Error as e:  # one (src, dst, why) per file: say the first reason, e.g. the disk is full
        raise OSError(f"staging the verifier into the episode folder failed: {e.args[0][0][2]}") from None


def make_readable(dest: Path) -> None:
    """Directories 755 and files 644 under ``dest`` (owned by host root: the sandbox's root reads, never writes)."""
    for d, dirs, files in os.walk(dest):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)


def clear(dest: Path) -> None:
    if not dest.is_dir():
        return
    for p in dest.iterdir():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
