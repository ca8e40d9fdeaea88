"""The action format the agent loop parses from an assistant turn.

An assistant turn may contain free text (reasoning) and **one** action; the first action in the text wins:

1. A tool call, Hermes/Qwen style::

       <tool_call>
       {"name": "bash", "arguments": {"command": "ls -la"}}
       </tool_call>

   ``name`` is ``"bash"`` (run ``arguments.command``) or ``"submit"`` (end the episode and run the verifier).
2. A fenced code block tagged ``bash``, ``sh``, ``shell`` or untagged: its content is the command::

       ```bash
       ls -la
       ```

3. ``SUBMIT`` alone on a line (outside a code block): end the episode and run the verifier.

A turn with no action (or a malformed one) is answered with an observation that restates this format; the env is
not stepped, and the turn still counts towards ``max_turns``.

Example:
    >>> parse_action("Let me look.\\n```bash\\nls -la\\n```")
    Action(kind='command', command='ls -la', error=None)
    >>> parse_action('<tool_call>{"name": "submit", "arguments": {}}</tool_call>').kind
    'submit'
    >>> parse_action("done\\nSUBMIT").kind
    'submit'
    >>> parse_action("hmm").kind
    'none'
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass

COMMAND, SUBMIT, NONE = "command", "submit", "none"

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_FENCE = re.compile(r"```(bash|sh|shell|console)?[ \t]*\n(.*?)```", re.DOTALL)
_SUBMIT_LINE = re.compile(r"^[ \t]*SUBMIT[ \t]*$", re.MULTILINE)

FORMAT_HELP = (
    "No valid action found. Run a command in a fenced block (```bash\\n<command>\\n```) or with a tool call "
    '(<tool_call>{"name": "bash", "arguments": {"command": "<command>"}}</tool_call>). '
    'When the task is done, write SUBMIT on its own line or call <tool_call>{"name": "submit"}</tool_call>.'
)

TRUNCATED_HELP = ("Not run: the turn was cut at the token limit before it ended. End the turn right after its "
                  "action: one fenced command block, or SUBMIT.")


@dataclass
class Action:
    kind: str
    """``"command"``, ``"submit"`` or ``"none"``."""
    command: str | None = None
    error: str | None = None
    """Why no action was found (for ``kind="none"``)."""

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


def _fence_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _FENCE.finditer(text)]


def parse_action(text: str) -> Action:
    """Parse the first action in an assistant turn (see the module docstring for the format)."""
    candidates: list[tuple[int, Action]] = []

    for m in _TOOL_CALL.finditer(text):
        try:
            call = json.loads(m.group(1))
        except json.JSONDecodeError as err:
            candidates.append((m.start(), Action(NONE, error=f"tool call is not valid JSON: {err}")))
            break
        name = call.get("name") if isinstance(call, dict) else None
        args = call.get("arguments") or {} if isinstance(call, dict) else {}
        if isinstance(args, str):  # some models emit arguments as a JSON string
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                args = {}
        if name == "submit":
            candidates.append((m.start(), Action(SUBMIT)))
        elif name == "bash" and isinstance(args, dict) and isinstance(args.get("command"), str):
            candidates.append((m.start(), Action(COMMAND, command=args["command"])))
        else:
            candidates.append((m.start(), Action(NONE, error=f"unknown tool call {call!r}; use 'bash' or 'submit'")))
        break

    fences = _fence_spans(text)
    for m in _FENCE.finditer(text):
        command = m.group(2).strip()
        if command:
            candidates.append((m.start(), Action(COMMAND, command=command)))
            break

    for m in _SUBMIT_LINE.finditer(text):
        if not any(s <= m.start() < e for s, e in fences):
            candidates.append((m.start(), Action(SUBMIT)))
            break

    if not candidates:
        return Action(NONE, error=FORMAT_HELP)
    return min(candidates, key=lambda c: c[0])[1]
