"""What one trial leaves behind besides its numbers: an ATIF trajectory and an asciinema v2 cast.

:class:`TrialRecorder` is fed by the harness as the episode runs (the instruction, then each action with the
observation it produced and the model's message and token counts when the agent reports them) and renders:

* ``trajectory.json`` — **ATIF** (Agent Trajectory Interchange Format, v1.6, Harbor's trajectory format): a
  ``user`` step with the instruction, one ``agent`` step per action with a ``tool_call`` (``bash``, ``keys`` or
  ``submit``) and the observation as its result, and ``final_metrics`` with the token totals;
* ``terminal.cast`` — an **asciinema v2** recording: a header line, then ``[seconds, "o", text]`` events with what
  the agent typed (after a ``$ `` prompt) and what the shell printed, at the times they happened.

Both are written whole (atomically) when the trial ends, so an interrupted trial leaves neither.

Example:
    >>> rec = TrialRecorder(agent_name="oracle", model_name=None, session_id="hello-file__0")
    >>> rec.start("Create greetings/hello.txt")
    >>> rec.action({"command": "echo hi"}, "hi\\n", t_sent=0.1, t_done=0.2)
    >>> [s["source"] for s in rec.trajectory()["steps"]]
    ['user', 'agent']
    >>> rec.cast().splitlines()[1]
    '[0.1, "o", "$ echo hi\\\\r\\\\n"]'
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

ATIF_VERSION = "ATIF-v1.6"
CAST_WIDTH, CAST_HEIGHT = 120, 40


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


def _crlf(text: str) -> str:
    """Terminal line ends: a bare ``\\n`` becomes ``\\r\\n`` (a recording of a real tty has them)."""
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def describe_action(action: Any) -> tuple[str, dict]:
    """``(tool name, arguments)`` for an env action: ``bash``, ``keys`` or ``submit``."""
    if isinstance(action, str):
        return "bash", {"command": action}
    if isinstance(action, dict):
        if action.get("submit"):
            return "submit", {}
        if "keys" in action:
            args = {"keys": action["keys"]}
            if action.get("wait") is not None:
                args["wait"] = action["wait"]
            return "keys", args
        if "command" in action:
            args = {"command": action["command"]}
            if action.get("timeout") is not None:
                args["timeout"] = action["timeout"]
            return "bash", args
    return "invalid", {"action": repr(action)[:2000]}


class TrialRecorder:
    """Collects one trial's steps and terminal events; renders ATIF and asciinema v2 (see the module docstring)."""

    def __init__(self, agent_name: str, model_name: str | None, session_id: str, agent_version: str = "t1"):
        self.agent_name, self.model_name, self.session_id = agent_name, model_name, session_id
        self.agent_version = agent_version
        self.steps: list[dict] = []
        self.events: list[list] = []
        self.t0 = time.monotonic()
        self.started_unix = int(time.time())
        self.prompt_tokens = self.completion_tokens = 0
        self.cost_usd = 0.0

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def start(self, instruction: str) -> None:
        self.steps.append({"step_id": 1, "timestamp": _now_iso(), "source": "user", "message": instruction})

    def action(
        self, action: Any, observation: str | None, t_sent: float, t_done: float, turn: dict | None = None
    ) -> None:
        """Record one action. ``t_sent``/``t_done``: seconds since the trial began (:meth:`elapsed`).

        ``turn`` is what the agent said about this action (``message``, ``reasoning``, ``prompt_tokens``,
        ``completion_tokens``, ``cost_usd``, ``tool_call_id``), when it says anything.
        """
        turn = turn or {}
        name, args = describe_action(action)
        step_id = len(self.steps) + 1
        call_id = turn.get("tool_call_id") or f"call_{step_id}"
        step: dict[str, Any] = {
            "step_id": step_id,
            "timestamp": _now_iso(),
            "source": "agent",
            "message": turn.get("message") or "",
            "tool_calls": [{"tool_call_id": call_id, "function_name": name, "arguments": args}],
        }
        if self.model_name:
            step["model_name"] = self.model_name
        if turn.get("reasoning"):
            step["reasoning_content"] = turn["reasoning"]
        if observation is not None:
            step["observation"] = {"results": [{"source_call_id": call_id, "content": observation}]}
        metrics = {k: turn[k] for k in ("prompt_tokens", "completion_tokens", "cost_usd") if turn.get(k) is not None}
        if metrics:
            step["metrics"] = metrics
            self.prompt_tokens += int(turn.get("prompt_tokens") or 0)
            self.completion_tokens += int(turn.get("completion_tokens") or 0)
            self.cost_usd += float(turn.get("cost_usd") or 0.0)
        self.steps.append(step)
        # the terminal: the prompt and what was typed when it was sent, the output when it came back
        if name == "bash":
            self.events.append([round(t_sent, 6), "o", _crlf(f"$ {args['command']}\n")])
        elif name == "keys":
            keys = args["keys"] if isinstance(args["keys"], list) else [args["keys"]]
            self.events.append([round(t_sent, 6), "o", _crlf(f"[keys] {' '.join(map(str, keys))}\n")])
        if observation:
            text = observation if observation.endswith("\n") else observation + "\n"
            self.events.append([round(max(t_done, t_sent), 6), "o", _crlf(text)])

    def note(self, text: str) -> None:
        """A line from t1 in the terminal recording (e.g. why a trial ended early)."""
        self.events.append([round(self.elapsed(), 6), "o", _crlf(f"[t1] {text}\n")])

    def trajectory(self, notes: str | None = None, extra: dict | None = None) -> dict:
        agent: dict[str, Any] = {"name": self.agent_name, "version": self.agent_version}
        if self.model_name:
            agent["model_name"] = self.model_name
        out: dict[str, Any] = {
            "schema_version": ATIF_VERSION,
            "session_id": self.session_id,
            "agent": agent,
            "steps": self.steps,
            "final_metrics": {
                "total_prompt_tokens": self.prompt_tokens,
                "total_completion_tokens": self.completion_tokens,
                "total_cost_usd": self.cost_usd,
                "total_steps": len(self.steps),
            },
        }
        if notes:
            out["notes"] = notes
        if extra:
            out["extra"] = extra
        return out

    def cast(self, title: str | None = None) -> str:
        header = {
            "version": 2,
            "width": CAST_WIDTH,
            "height": CAST_HEIGHT,
            "timestamp": self.started_unix,
            "env": {"SHELL": "/bin/bash", "TERM": "xterm-256color"},
        }
        if title:
            header["title"] = title
        lines = [json.dumps(header)]
        last = 0.0
        for t, kind, data in self.events:
            last = max(last, t)  # asciinema needs non-decreasing times
            lines.append(json.dumps([last, kind, data]))
        return "\n".join(lines) + "\n"
