"""Gymnasium spaces for terminal text.

Gymnasium's :class:`~gymnasium.spaces.Text` checks membership against a finite character set,
but a shell prints any Unicode. These subclasses keep ``Text``'s length cap and its sampling
alphabet, and document exactly what they contain:

* :class:`TerminalText` (observations): any ``str`` of at most ``max_length`` characters without
  C0 control characters other than newline and tab (t1 replaces those with U+FFFD, so every
  observation t1 produces is in the space).
* :class:`ShellAction` (actions): a command string of at most ``max_length`` characters, or one of
  the dict actions ``{"command": str, "timeout": float?}``, ``{"keys": str | list[str], "wait":
  float?}``, ``{"submit": True}``. ``timeout`` and ``wait`` are seconds: finite, > 0 and at most
  ``max_seconds`` when the space has one (``None`` or leaving them out means the default). A keys
  list holds at most ``max_keys`` items. ``sample()`` returns a harmless ``echo`` command, and
  ``problem(x)`` says in one line why ``x`` is not in the space.
"""

from __future__ import annotations

import math
import numbers
import re
import string
from typing import Any

import numpy as np
from gymnasium.spaces import Text

_FORBIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SAMPLE_CHARSET = string.ascii_letters + string.digits
MAX_KEYS = 256
"""Items in one ``{"keys": [...]}`` action (a long text goes in as one string item)."""


class TerminalText(Text):
    def __init__(self, max_length: int, seed: int | np.random.Generator | None = None):
        super().__init__(max_length=max_length, min_length=0, charset=_SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length and not _FORBIDDEN.search(x)

    def __repr__(self) -> str:
        return f"TerminalText(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, TerminalText) and other.max_length == self.max_length


class ShellAction(Text):
    ACTION_KEYS = ({"command", "timeout"}, {"keys", "wait"}, {"submit"})

    def __init__(
        self,
        max_length: int = 100_000,
        max_keys: int = MAX_KEYS,
        max_seconds: float | None = None,
        seed: int | np.random.Generator | None = None,
    ):
        super().__init__(max_length=max_length, min_length=1, charset=_SAMPLE_CHARSET, seed=seed)
        self.max_keys = max_keys
        self.max_seconds = max_seconds

    def sample(self, mask=None, probability=None) -> str:
        word = super().sample(mask=mask, probability=probability)[:32]
        return f"echo {word}"

    def contains(self, x: Any) -> bool:
        return self.problem(x) is None

    def problem(self, x: Any) -> str | None:
        """Why ``x`` is not an action of this space (one line), or None if it is one."""
        if isinstance(x, str):
            return None if 0 < len(x) <= self.max_length else self._length_problem("the command", len(x))
        if not isinstance(x, dict) or not x:
            return f"expected a command string or a dict action, got {type(x).__name__}"
        keys = set(x)
        if keys <= {"command", "timeout"} and "command" in x:
            if not isinstance(x["command"], str):
                return f"command must be a string, got {type(x['command']).__name__}"
            if not 0 < len(x["command"]) <= self.max_length:
                return self._length_problem("the command", len(x["command"]))
            return self._seconds_problem("timeout", x.get("timeout"))
        if keys <= {"keys", "wait"} and "keys" in x:
            k = x["keys"]
            if isinstance(k, list):
                if len(k) > self.max_keys:
                    return f"keys: {len(k)} items, more than {self.max_keys}: send long text as one string item"
                if not all(isinstance(i, str) for i in k):
                    return "keys must be a string or a list of strings"
                size = sum(len(i) for i in k)
            elif isinstance(k, str):
                size = len(k)
            else:
                return f"keys must be a string or a list of strings, got {type(k).__name__}"
            if size > self.max_length:
                return self._length_problem("keys", size)
            return self._seconds_problem("wait", x.get("wait"))
        if keys == {"submit"}:
            return None if x["submit"] is True else f"submit must be True, got {brief(x['submit'], 50)}"
        return f"unknown action keys {sorted(map(str, keys))}"

    def _length_problem(self, what: str, n: int) -> str:
        return f"{what} has {n} characters; it must have 1 to {self.max_length}"

    def _seconds_problem(self, name: str, value: Any) -> str | None:
        if value is None:
            return None  # the default
        if not is_seconds(value):
            return f"{name} must be a finite number of seconds > 0, got {brief(value, 50)}"
        if self.max_seconds is not None and value > self.max_seconds:
            return f"{name} {float(value):g} s is over the limit of {self.max_seconds:g} s"
        return None

    def __repr__(self) -> str:
        return f"ShellAction(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return (
            isinstance(other, ShellAction)
            and other.max_length == self.max_length
            and other.max_keys == self.max_keys
            and other.max_seconds == self.max_seconds
        )


def is_seconds(x: Any) -> bool:
    """A usable duration: a real number (not a bool), finite and > 0 (an int too large for a float is not)."""
    if not isinstance(x, numbers.Real) or isinstance(x, bool):
        return False
    try:
        return math.isfinite(x) and x > 0
    except OverflowError:  # math.isfinite(10**400)
        return False


def brief(x: Any, limit: int = 200) -> str:
    """``repr(x)`` on one line, cut to ``limit`` characters: how an error message shows a value it got (the repr of
    a numpy array, for one, spans several lines)."""
    text = " ".join(repr(x).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
