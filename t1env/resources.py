"""Where the data that ships with t1 lives: the built-in task corpus and the verifier runtime.

In a source checkout (editable install) they are the top-level ``tasks/`` and ``verifiers/``
folders; in an installed wheel they are copied under ``t1env/_builtin/``.
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """``tasks`` or ``verifiers``: the installed copy if present, else the source checkout's."""
    installed = _PKG / "_builtin" / name
    if installed.is_dir():
        return installed
    return _PKG.parent / name
