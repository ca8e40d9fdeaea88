"""Helpers shared by the local verifier tests (prepared verifier, zygote)."""

from __future__ import annotations

from t1env.env import TerminalEnv


def play(task: str, commands: list[str], env: TerminalEnv | None = None, **kw) -> dict:
    """One episode of ``task``: ``commands``, then submit; the final ``info``. ``env``: play on it (left open), else
    on a new env made with ``kw`` (``prestart=False``) and closed."""
    own = env is None
    env = env or TerminalEnv(task=task, prestart=False, **kw)
    try:
        env.reset(seed=0, options={"task": task} if len(env.task_ids) > 1 else None)
        for c in commands:
            env.step({"command": c})
        _, _, terminated, _, info = env.step({"submit": True})
        assert terminated
        return info
    finally:
        if own:
            env.close()


def results(info: dict) -> list[tuple[str, bool, str]]:
    """(name, passed, outcome) of every check."""
    return [(c["name"], c["passed"], c["outcome"]) for c in info["checks"]]
