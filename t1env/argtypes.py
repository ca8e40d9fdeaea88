"""argparse value types shared by t1's command lines (``t1env`` and ``t1train``).

Bottom layer: imports nothing of t1, so either CLI can use it without importing the other.

Example:
    >>> at_least_one("3")
    3
"""

from __future__ import annotations

import argparse


def at_least_one(text: str) -> int:
    """argparse type: an integer >= 1 (``validate --runs 0`` would pass a task without a single oracle run)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n
