"""Writing files so that a crash never leaves a half-written one: shared by t1env (eval results) and t1train.

Example:
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "r.json"
    >>> write_atomic(p, '{"ok": true}\\n'); p.read_text()
    '{"ok": true}\\n'
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def fsync_dir(path: str | Path) -> None:
    """Make a rename or a new entry in ``path`` durable (best effort where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` in one step (temp file in the same folder, fsync, rename): readers, and a
    crash, see the old content or the new, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
