"""Gymnasium spaces for terminal text.

Gymnasium's :class:`~gymnasium.spaces.Text` checks membership against a finite character set,
but a shell prints any Unicode. These subclasses keep ``Text``'s length cap and its sampling
alphabet, and document exactly what they contain:

* :class:`TerminalText` (observations): any ``str`` of at most ``max_length`` characters without
  C0 control characters other than newline and tab (t1 replaces those with U+FFFD, so every
  observation t1 produces is in the space).
* :class:`ShellAction` (actions): a command string of at most ``max_length`` characters, or one of
  the dict actions ``{"command": str, "timeout": float?}``, ``{"keys": str | list[str], "wait":
  float?}``, ``{"submit": True}``. ``sample()`` returns a harmless ``echo`` command.
"""

from __future__ import annotations

import re
import string
from typing import Any

import numpy as np
from gymnasium.spaces import Text

_FORBIDDEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SAMPLE_CHARSET = string.ascii_letters + string.digits


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

    def __init__(self, max_length: int = 100_000, seed: int | np.random.Generator | None = None):
        super().__init__(max_length=max_length, min_length=1, charset=_SAMPLE_CHARSET, seed=seed)

    def sample(self, mask=None, probability=None) -> str:
        word = super().sample(mask=mask, probability=probability)[:32]
        return f"echo {word}"

    def contains(self, x: Any) -> bool:
        if isinstance(x, str):
            return 0 < len(x) <= self.max_length
        if not isinstance(x, dict) or not x:
            return False
        keys = set(x)
        if keys <= {"command", "timeout"} and isinstance(x.get("command"), str):
            return 0 < len(x["command"]) <= self.max_length
        if keys <= {"keys", "wait"} and "keys" in x:
            k = x["keys"]
            return isinstance(k, str) or (isinstance(k, list) and all(isinstance(i, str) for i in k))
        return keys == {"submit"} and x["submit"] is True

    def __repr__(self) -> str:
        return f"ShellAction(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ShellAction) and other.max_length == self.max_length
