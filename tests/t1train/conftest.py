"""Shared fixtures for t1train tests: the tiny MoE (real model, CPU) and one small scripted env.

``ScriptedEnv`` is the only fake in these tests. It follows ``T1Terminal-v0``'s API (reset/step/close, reward at
the end, ``info`` with per-check results) so the agent loop can be tested without sandboxes; the integration test
in ``test_rollout.py`` runs the real env.
"""

from __future__ import annotations

import pytest


class ScriptedEnv:
    """A T1Terminal-v0 look-alike: commands echo back, ``{"submit": True}`` ends with a reward.

    Args:
        max_turns: truncate after this many commands (reward given, like the real env's verify_on_truncate).
        checks: number of verifier checks; the reward is how many of ``passing`` commands were run.
        passing: commands that each make one check pass.
    """

    def __init__(
        self,
        task: str = "scripted",
        max_turns: int = 100,
        checks: int = 2,
        passing: tuple[str, ...] = ("touch a", "touch b"),
    ):
        self.task, self.max_turns, self.checks, self.passing = task, max_turns, checks, passing
        self.closed = False
        self.commands: list[str] = []

    def reset(self, seed=None):
        self.commands, self.turn = [], 0
        return f"Task {self.task} (seed {seed}): create files a and b.", {"task_id": self.task}

    def _result(self):
        passed = sum(c in self.commands for c in self.passing)
        checks = [{"name": f"check_{i}", "passed": i < passed} for i in range(self.checks)]
        return {"checks": checks, "passed": passed, "total": self.checks, "resolved": passed == self.checks}

    def step(self, action):
        if isinstance(action, dict) and action.get("submit"):
            info = self._result()
            return "[t1] episode ended (submitted)", float(info["passed"]), True, False, info
        self.turn += 1
        self.commands.append(action)
        obs = f"ran {action!r}\nline two {self.turn}\n"
        if self.turn >= self.max_turns:
            info = self._result()
            return obs, float(info["passed"]), False, True, {"exit_code": 0, **info}
        return obs, 0.0, False, False, {"exit_code": 0, "duration": 0.001, "timed_out": False}

    def close(self):
        self.closed = True


@pytest.fixture(scope="session")
def tiny():
    """``(model, tokenizer)`` of the tiny MoE, built once per test session (cached on disk across sessions)."""
    from t1train.models import tiny_moe

    return tiny_moe()


@pytest.fixture(scope="session")
def tiny_engine(tiny):
    from t1train.engines.hf import HFEngine

    model, tokenizer = tiny
    return HFEngine(model, tokenizer)


@pytest.fixture
def scripted_env():
    return ScriptedEnv


def tiny_config(output_dir, **kw):
    """A ``T1Config`` for one short step of the tiny model on ``ScriptedEnv``: 2 seeds x 2 generations of 2 turns
    of 8 new tokens, one optimizer step, nothing saved; ``kw`` overrides any field."""
    from t1train.trainer import T1Config

    base = dict(
        output_dir=str(output_dir),
        tasks=["scripted"],
        train_seeds=[0, 1],
        max_turns=2,
        max_new_tokens=8,
        num_generations=2,
        per_device_train_batch_size=4,
        max_steps=1,
        rollout_concurrency=4,
        system_prompt="Act.",
        disable_tqdm=True,
        save_strategy="no",
        report_to="none",
        learning_rate=1e-3,
        seed=0,
    )
    base.update(kw)
    return T1Config(**base)


@pytest.fixture
def one_thread():
    """Torch on one thread for the test (the tiny model: one thread is much faster than two on a shared machine).
    Modules that train use it for every test: ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class RecordingEngine:
    """Passes calls through to a real engine and keeps every (prompt, generation) pair."""

    def __init__(self, engine):
        self.engine, self.calls = engine, []
        self.max_concurrency = engine.max_concurrency

    def generate(self, prompts, sampling, return_routed_experts=False, **kwargs):
        gens = self.engine.generate(prompts, sampling, return_routed_experts, **kwargs)
        self.calls += [(list(p), g) for p, g in zip(prompts, gens)]
        return gens
