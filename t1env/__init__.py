"""t1env: Gymnasium environments where an agent operates a real, sandboxed shell.

Importing ``t1env`` registers ``T1Terminal-v0``::

    import gymnasium as gym, t1env
    env = gym.make("T1Terminal-v0", task="hello-file")

``gym.make("t1env:T1Terminal-v0")`` works without the import.

The package is built in layers, each importing only from itself and the layers below (bottom to top):
foundation (errors, resources, files, spaces) -> task (``task_model``, ``formats``, ``images``, ``task``) ->
catalogue (``families``, ``registry``) -> ``sandbox`` -> episode (``shell``, ``verify``, ``formats.steps``) ->
agent (``agent.protocol``, ``agents``) -> env (``options``, ``env``, ``tool_env``, ``executor``) -> tools
(``eval``, ``validate``, ``decontam``, ``export``, ...) -> this package's face and ``cli``.
``docs/architecture.md`` has the table; ``tests/test_layers.py`` checks it without importing anything.
"""

from __future__ import annotations

import gymnasium as gym

from t1env.env import TerminalEnv
from t1env.registry import get_task, list_tasks
from t1env.task import Task, TaskError, load_task
from t1env.verify import VerifyResult, verify

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
