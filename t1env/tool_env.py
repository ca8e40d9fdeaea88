"""TerminalToolEnv: t1 tasks for TRL's ``GRPOTrainer(environment_factory=...)`` — no t1train needed.

TRL (>= 1.16) makes one instance per rollout, calls ``reset(**row)`` with the dataset row and
appends the returned text to the prompt, exposes every public method as a tool the model can
call, and calls ``get_reward()`` once the rollout is complete. Here:

* ``reset(**row)`` starts a fresh sandbox for ``row["task"]`` (or a task picked from ``row["seed"]``)
  and returns the task's instruction;
* ``bash(command)`` runs a command in the sandbox and returns its output and exit code;
* ``keys(keys, wait)`` types keys into a full-screen program and returns the screen;
* ``submit()`` ends the episode and runs the verifier;
* ``get_reward()`` runs the verifier if the model never submitted, and returns the reward (by
  default the number of passing checks); the sandbox is stopped as soon as the episode ends.

These are the ``tools`` style of the agent protocol (:mod:`t1env.agent.protocol`, ``docs/protocol.md``): the
same tools as :data:`~t1env.agent.protocol.TOOLS`, the same observation text (output cut in the middle past
``max_observation_chars``, then ``[exit code: N]``) as ``t1train`` and ``t1env eval`` give the model.

Each instance holds at most one sandbox, only while its episode runs: ``prestart`` is off (TRL makes
one instance per rollout, so a prestarted spare would never be used). ``close()`` frees whatever is
left (safe to call twice); call it when an instance is dropped mid-episode.

Example:
    >>> from trl import GRPOConfig, GRPOTrainer                           # doctest: +SKIP
    >>> from t1env.tool_env import TerminalToolEnv
    >>> trainer = GRPOTrainer(model=..., args=GRPOConfig(max_steps=10),   # doctest: +SKIP
    ...     train_dataset=Dataset.from_dict({"prompt": [[{"role": "user", "content": "Solve the task."}]] * 8,
    ...                                      "task": ["hello-file"] * 8}),
    ...     environment_factory=TerminalToolEnv)
"""

from __future__ import annotations

from typing import Any

from t1env.agent.protocol import Protocol
from t1env.env import TerminalEnv


class TerminalToolEnv:
    """One t1 episode per TRL rollout. Keyword arguments go to :class:`~t1env.env.TerminalEnv`
    (``prestart`` defaults to False here), except ``max_observation_chars`` (the protocol's, default 8000)."""

    def __init__(self, max_observation_chars: int = 8000, **env_kwargs: Any):
        env_kwargs.setdefault("prestart", False)
        self._protocol = Protocol(name="tools", max_observation_chars=max_observation_chars)
        self._env = TerminalEnv(**env_kwargs)
        # one episode per instance (TRL makes one per rollout): a verifier zygote would be started for one episode
        # and outlive it; the prepared verifier lives and ends with the episode's sandbox
        self._env._zygotes = None
        self._reward: float | None = None
        self._active = False
        self.last_info: dict = {}

    def reset(self, **row: Any) -> str:
        task = row.get("task") or row.get("task_id")
        seed = row.get("seed")
        obs, info = self._env.reset(seed=None if seed is None else int(seed), options={"task": task} if task else None)
        self._reward = None
        self._active = True
        self.last_info = info
        return obs

    def bash(self, command: str) -> str:
        """Run a bash command in the task's sandboxed terminal and return what it printed.

        The shell is persistent: the current directory, variables and functions carry over between
        calls. Commands have no stdin (interactive programs end at once).

        Args:
            command: The bash command line to run, e.g. "ls -la /app" or a multi-line script.

        Returns:
            The command's combined stdout and stderr, followed by its exit code.
        """
        return self._play({"command": command})

    def keys(self, keys: list[str], wait: float = 0.5) -> str:
        """Type keys into a full-screen program running in the terminal (an editor, a pager, a REPL) and return
        the screen.

        Args:
            keys: Keys to send, in order: text, or key names such as "Enter", "Escape", "C-c", e.g. [":wq", "Enter"].
            wait: Seconds to wait before reading the screen.

        Returns:
            The terminal's screen after the keys.
        """
        return self._play({"keys": keys, "wait": wait})

    def _play(self, action: dict) -> str:
        if not self._active:
            return "[t1] the episode is over; no more commands can run"
        obs, reward, terminated, truncated, info = self._env.step(action)
        self.last_info = info
        if terminated or truncated:
            self._end(reward)
            return f"{obs}\n[t1] the episode ended ({info.get('end_reason')})"
        return self._protocol.observation(obs, info)

    def submit(self) -> str:
        """Submit the task for grading. Call this once the task is done; no command can run after it.

        Returns:
            How many of the task's checks passed.
        """
        if not self._active:
            return "[t1] the episode is already over"
        obs, reward, terminated, truncated, info = self._env.step({"submit": True})
        self.last_info = info
        self._end(reward)
        return obs

    def get_reward(self) -> float:
        """The episode's reward; verifies first if the model never submitted."""
        if self._active:
            self.submit()
        return float(self._reward or 0.0)

    def _close(self) -> None:
        """Stop the sandbox, if one is still running. Idempotent."""
        self._active = False
        self._env.close()

    # A property, not a method: TRL offers every public method of the class to the model as a tool, and closing
    # the sandbox is not the model's to call. ``env.close()`` works as usual.
    close = property(lambda self: self._close, doc="``close()``: stop the sandbox, if one is running. Idempotent.")

    def _end(self, reward: float) -> None:
        self._reward = float(reward)
        self._active = False

    def __del__(self):
        try:
            self._close()
        except Exception:  # noqa: S110 - at interpreter exit the modules _close() needs may be gone already
            pass
