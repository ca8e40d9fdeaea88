"""One thread, as long-lived as the process, that starts every bubblewrap process meant to outlive its caller.

bwrap's ``--die-with-parent`` is the kernel's parent-death signal (``PR_SET_PDEATHSIG``), and that signal fires
when the *thread* that forked the process exits, not the process. A sandbox, a prepared verifier or a verifier
zygote started from a short-lived thread (a caller's ``threading.Thread`` around ``reset()``, a pool worker that is
retired, the thread that warms a zygote) would be killed with that thread while its episode still needs it. Started
from :func:`run`'s thread, they die with the process, as ``--die-with-parent`` promises, and never earlier.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_launcher: tuple[int, ThreadPoolExecutor] | None = None  # (pid, its one thread); a forked child makes its own


def _forget() -> None:
    """In a forked child: the parent's thread is not there, and its lock may have been held at the fork."""
    global _lock, _launcher
    _lock, _launcher = threading.Lock(), None


os.register_at_fork(after_in_child=_forget)


def run(fn: Callable[..., T], *args, **kwargs) -> T:
    """``fn(*args, **kwargs)`` in the launcher thread (here if this is it), its result or its exception."""
    global _launcher
    with _lock:
        if _launcher is None or _launcher[0] != os.getpid():  # none yet (or a child forked without os.fork)
            _launcher = (os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="t1env-launcher"))
        pool = _launcher[1]
    if threading.current_thread().name.startswith("t1env-launcher"):
        return fn(*args, **kwargs)
    return pool.submit(fn, *args, **kwargs).result()
