"""Where t1's files live: the data that ships with it (the built-in task corpus, the verifier runtime) and the
cache folder of what it builds once and reuses.

In a source checkout (editable install) the shipped data is the top-level ``tasks/`` and ``verifiers/``
folders; in an installed wheel it is copied under ``t1env/_builtin/``.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

_PKG = Path(__file__).resolve().parent

CACHE_ENV = "T1_CACHE_DIR"


def data_dir(name: str) -> Path:
    """``tasks`` or ``verifiers``: the installed copy if present, else the source checkout's."""
    installed = _PKG / "_builtin" / name
    if installed.is_dir():
        return installed
    return _PKG.parent / name


def cache_dir() -> Path:
    """The cache folder: ``$T1_CACHE_DIR`` if set, else the user cache folder of t1
    (``platformdirs.user_cache_dir("t1")``: ``$XDG_CACHE_HOME/t1`` or ``~/.cache/t1`` on Linux).

    Everything t1 builds once and reuses goes under it: the verifier bundle (``verifier-HASH/``), family
    instances (``families/``) and the tiny model (``tiny-moe-HASH/``). Each entry is keyed by a hash of what
    made it and written to a temporary folder then renamed, so deleting the folder is always safe.

    Example:
        >>> import os
        >>> os.environ["T1_CACHE_DIR"] = "/tmp/t1-cache"
        >>> cache_dir()
        PosixPath('/tmp/t1-cache')
        >>> del os.environ["T1_CACHE_DIR"]
    """
    root = os.environ.get(CACHE_ENV)
    return Path(root) if root else Path(platformdirs.user_cache_dir("t1"))
