"""t1env: Gymnasium environments where an agent operates a real, sandboxed shell.

Importing ``t1env`` registers ``T1Terminal-v0``::

    import gymnasium as gym, t1env
    env = gym.make("T1Terminal-v0", task="hello-file")

``gym.make("t1env:T1Terminal-v0")`` works without the import.

The package is built in layers, each importing only from itself and the layers below (bottom to top):
foundation (errors, resources, files, spaces) -> task (``task_model``, ``formats``, ``images``, ``task``) ->
catalogue (``families``, ``registry``) -> ``sandbox/`` -> ``episode/`` (shell, verify, steps) ->
``agent/`` (protocol, reference agents) -> env (``options``, ``env``, ``tool_env``, ``executor``) -> ``eval/`` and
``tools/`` (validate, exploits, decontam, export, catalog, leaks, ...) -> this package's face and ``cli``.
``docs/architecture.md`` has the table; ``tests/test_layers.py`` checks it without importing anything.
"""

from __future__ import annotations

import gymnasium as gym

from t1env.env import TerminalEnv
from t1env.episode.verify import VerifyResult, verify
from t1env.registry import get_task, list_tasks
from t1env.task import Task, TaskError, load_task

__version__ = "0.1.0"

ENV_ID = "T1Terminal-v0"

if ENV_ID not in gym.registry:
    # nondeterministic: a real shell's timings (and anything a task prints about them) vary.
    gym.register(id=ENV_ID, entry_point="t1env.env:TerminalEnv", nondeterministic=True)

__all__ = [
    "ENV_ID",
    "Task",
    "TaskError",
    "TerminalEnv",
    "VerifyResult",
    "get_task",
    "list_tasks",
    "load_task",
    "verify",
]
