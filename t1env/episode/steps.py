"""Harbor multi-step tasks: the ``min_reward`` gate between steps and one result for the episode.

:class:`~t1env.env.TerminalEnv` plays the steps of a task whose :attr:`Origin.steps` is set in
order, in one sandbox: on each submit but the last, that step's verifier runs (``shared`` mode, so
the sandbox lives on), and the next step's instruction is the observation when the step's reward
meets its ``min_reward`` (:func:`gate`); otherwise the episode ends there. At the end,
:func:`combine` joins the steps' per-check results (names ``step/check``; steps not reached: not run).

A step's reward, as Harbor computes it: script mode, the values its ``reward.json`` (or
``reward.txt``: the key ``reward``) gave; pytest mode, ``reward`` = 1 when every check passed, else 0
(what the usual ``test.sh`` writes). ``multi_step_reward_strategy``: ``mean`` (Harbor's default) —
every step's checks count; ``final`` — only the last step's checks count.
"""

from __future__ import annotations

from t1env.episode.verify import CheckResult, VerifyResult, not_run
from t1env.task import Task


def step_rewards(step: Task, res: VerifyResult) -> dict[str, float]:
    if step.origin is not None and step.origin.verifier == "script":
        out = {}
        for c in res.checks:
            value = c.message.rsplit(" = ", 1)[-1] if c.outcome in ("passed", "failed") else ""
            try:
                out[c.name] = float(value)
            except ValueError:
                continue
        return out
    return {"reward": 1.0 if res.resolved else 0.0}


def gate(step: Task, res: VerifyResult) -> str | None:
    """Why the episode stops after ``step`` (its ``min_reward`` not met), or None to go on."""
    need = step.origin.min_reward if step.origin is not None else None
    if need is None:
        return None
    need = {"reward": float(need)} if isinstance(need, (int, float)) else need
    got = step_rewards(step, res)
    for key, threshold in need.items():
        actual = got.get(key, float("-inf"))
        if actual < threshold:
            return f"step {step.origin.step_name}: {key}={actual:g} below min_reward {threshold:g}"
    return None


def combine(task: Task, results: list[VerifyResult]) -> VerifyResult:
    """The episode's result from the steps' results (fewer results than steps: the rest were not reached)."""
    steps = task.origin.steps
    checks: list[CheckResult] = []
    tamper, notes, errors, duration = [], [], [], 0.0
    for i, step in enumerate(steps):
        name = step.origin.step_name
        res = results[i] if i < len(results) else not_run(step.declared_checks() or ["reward"], "step not reached", "")
        if task.origin.reward_strategy == "final" and i < len(steps) - 1:
            continue
        checks += [CheckResult(f"{name}/{c.name}", c.passed, c.outcome, c.message, c.duration) for c in res.checks]
        tamper += res.tamper
        notes += [f"{name}: {n}" for n in res.notes]
        if res.error:
            errors.append(f"{name}: {res.error}")
        duration += res.duration
    out = VerifyResult(
        checks, duration, "; ".join(errors) or None, results[-1].log if results else "", tamper=tamper, notes=notes
    )
    out.isolation = results[-1].isolation if results else "none"
    return out
