"""t1's own errors: every one derives from :class:`T1Error`, so a caller can catch t1's failures in one clause.

Each keeps the standard base it has always had (``TaskError`` is a ``ValueError``, ``SandboxError`` a
``RuntimeError``, ...), so code written against those keeps working, and each message stays one line that names
the file and field and says the fix. This module imports nothing of t1's: it is the bottom layer.

Example:
    >>> from t1env.errors import T1Error
    >>> from t1env.task import TaskError
    >>> issubclass(TaskError, T1Error) and issubclass(TaskError, ValueError)
    True
"""

from __future__ import annotations


class T1Error(Exception):
    """Base of every error t1 raises on purpose (bad input, a sandbox that cannot start, an engine that fails)."""
