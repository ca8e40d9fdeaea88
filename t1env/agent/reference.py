"""Reference agents: the oracle (runs the task's solution), the no-op agent, and a human at a prompt.

An agent is anything with ``act(observation, info) -> action``; :func:`run_episode` plays one
episode of a :class:`~t1env.env.TerminalEnv` with it.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any, Protocol

from t1env.agent.protocol import COMMAND, KEYS, SUBMIT, Action, format_observation
from t1env.formats.oracle import oracle_actions
from t1env.task import Task


class Agent(Protocol):
    def act(self, observation: str, info: dict) -> Any: ...


def typed_script(script: str) -> str:
    r"""A shell script's lines as an agent types them into the live shell: without blank lines, the shebang and
    ``set -…`` lines (in the session's own shell ``set -e`` would end the session on the first failing command).

    Example:
        >>> typed_script("#!/bin/bash\nset -euo pipefail\n\ncd /app\nls\n")
        'cd /app\nls'
    """
    keep = [
        ln for ln in script.splitlines() if ln.strip() and not ln.startswith("#!") and not re.match(r"\s*set -", ln)
    ]
    return "\n".join(keep)


def oracle_command(task: Task, typed: bool = False) -> str:
    """The task's ``solution/solve.sh`` as one shell command.

    By default, the script verbatim in a quoted heredoc run by a child ``bash``: nothing in it is expanded, and its
    ``set -e`` (or any option it sets) applies to that child, as when the script is run as a file. With
    ``typed=True``, the script's lines as an agent types them into the live shell (what SFT imitates): blank lines,
    the shebang and ``set -…`` lines are left out, since in the session's own shell ``set -e`` would end the session
    on the first failing command. Typed, a failing line does not stop the lines after it.

    Example:
        >>> from t1env.registry import get_task
        >>> oracle_command(get_task("hello-file"), typed=True).splitlines()[:2]
        ['cd /app', 'mkdir -p greetings']
    """
    script = task.solution.read_text(encoding="utf-8", errors="surrogateescape")
    if typed:
        return typed_script(script)
    fence = "T1_ORACLE_EOF"
    while fence in script:
        fence += "_"
    return f"bash <<'{fence}'\n{script.rstrip()}\n{fence}"


def oracle_command_count(task: Task) -> int:
    """Commands in solve.sh: non-blank, non-comment lines outside heredoc bodies (an estimate)."""
    count, heredoc_end = 0, None
    for raw in task.solution.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.strip()
        if heredoc_end is not None:
            if line == heredoc_end:
                heredoc_end = None
            continue
        if not line or line.startswith("#") or line in ("}", "fi", "done", "esac", "then", "do", "else", "{"):
            continue
        count += 1
        if "<<" in line:
            word = line.split("<<", 1)[1].strip().lstrip("-").strip()
            heredoc_end = word.split()[0].strip("'\"") if word else None
    return count


class OracleAgent:
    """Runs the task's ``solution/solve.sh`` as one command, then submits. Imported tasks
    (:mod:`t1env.formats.oracle`): a Terminal-Bench ``solution.yaml`` is typed key by key, a Harbor
    ``solve.sh`` runs from ``/solution``; a multi-step task's oracle plays each step's solution."""

    def __init__(self, task: Task, timeout: float | None = None):
        self.task = task
        self.timeout = timeout or task.spec.limits.agent_timeout
        self._plan: list | None = None
        self._step = 0

    def act(self, observation: str, info: dict) -> Any:
        step = info.get("step", self._step)  # reset() and a multi-step task's step change carry "step"
        if self._plan is None or step != self._step:
            self._step, self._plan = step, self._actions(step)
        return self._plan.pop(0) if self._plan else {"submit": True}

    def _actions(self, step: int) -> list:
        task = self.task.origin.steps[step] if self.task.origin is not None and self.task.origin.steps else self.task
        return oracle_actions(task, self.timeout) or [{"command": oracle_command(task), "timeout": self.timeout}]


class NopAgent:
    """Submits at once: the baseline a task must not give full marks to."""

    def act(self, observation: str, info: dict) -> Any:
        return {"submit": True}


class HumanAgent:
    """Reads actions from a terminal. ``:submit`` submits, ``:keys A B C`` sends named keys.

    The human sees what a model sees (:mod:`t1env.agent.protocol`): the instruction, then each output cut in the
    middle past ``max_observation_chars`` and followed by ``[exit code: N]``.
    """

    def __init__(self, stdin=None, stdout=None, max_observation_chars: int = 8000):
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.max_observation_chars = max_observation_chars
        self._started = False

    def act(self, observation: str, info: dict) -> Any:
        text = format_observation(observation, info, self.max_observation_chars) if self._started else observation
        self._started = True
        self.stdout.write(text if text.endswith("\n") or not text else text + "\n")
        self.stdout.write("t1$ ")
        self.stdout.flush()
        return self.parse(self.stdin.readline()).to_env()

    @staticmethod
    def parse(line: str) -> Action:
        """A typed line as an action: ``:submit`` (or end of input), ``:keys A B C``, else a command."""
        if not line or line.strip() == ":submit":
            return Action(SUBMIT)
        if line.startswith(":keys "):
            return Action(KEYS, keys=line[len(":keys ") :].split(), wait=1.0)
        return Action(COMMAND, command=line.rstrip("\n") or "true")


@dataclass
class Episode:
    task_id: str
    reward: float
    terminated: bool
    truncated: bool
    turns: int
    info: dict = field(repr=False)


def run_episode(env, agent: Agent, seed: int | None = None, options: dict | None = None) -> Episode:
    obs, info = env.reset(seed=seed, options=options)
    task_id = info["task_id"]
    turns = 0
    while True:
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
        if info.get("action") != "submit":
            turns += 1
        if terminated or truncated:
            return Episode(task_id, float(reward), terminated, truncated, turns, info)
