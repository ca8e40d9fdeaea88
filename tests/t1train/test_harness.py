"""The harness runner on real hello-file episodes (local bubblewrap sandboxes, the real verifier) with the tiny MoE:
the example harness as a subprocess speaking the official ``openai`` client to the runner's endpoint, in-process
harnesses (``harness_agents.py``), and one training step on what the endpoint recorded."""

from __future__ import annotations

import copy
import re
import shutil
import sys
from pathlib import Path

import pytest
import torch

from t1train.engines.base import SamplingParams
from t1train.engines.hf import HFEngine
from t1train.harness import HarnessConfig, HarnessRunner
from t1train.rollout import EpisodeSpec, RolloutConfig, make_env_factory
from t1train.sft import OracleEngine
from t1train.trainer import T1Trainer

from .conftest import tiny_config
from .test_serve import RecordingEngine, assert_no_drift

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="the local backend needs bubblewrap")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = f"{sys.executable} {ROOT / 'examples' / 'harness' / 'json_agent.py'}"


@pytest.fixture(autouse=True)
def harness_agents(monkeypatch, one_thread):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # harness_agents:...


@pytest.fixture(scope="module")
def engine(tiny):
    model, tokenizer = tiny
    return RecordingEngine(HFEngine(model, tokenizer))


def runner(engine, tokenizer, harness: str, **rollout) -> HarnessRunner:
    config = RolloutConfig(concurrency=2, max_turns=6, **rollout)
    sampling = SamplingParams(max_new_tokens=8, seed=0)
    return HarnessRunner(engine, tokenizer, make_env_factory("local"), sampling, config, HarnessConfig(harness))


def test_the_example_harness_is_recorded_exactly_and_scored_by_the_env(tiny, engine):
    """The example harness (its own prompt, JSON actions, the openai client on OPENAI_BASE_URL) in a subprocess:
    each episode is one segment whose ids are the engine's, and the reward is the verifier's. The tiny model never
    writes a valid action, so the harness runs no command: the score is the no-op agent's, 0 of hello-file's 5."""
    trajs = runner(engine, tiny[1], EXAMPLE + " --max-steps 3 --max-tokens 8").run(
        [EpisodeSpec("hello-file", 0), EpisodeSpec("hello-file", 1)]
    )
    for traj in trajs:
        assert traj.error is None and traj.metadata["harness_exit_code"] == 0, traj.metadata.get("harness_stderr")
        assert traj.termination == "submit" and traj.metadata["commands"] == 0
        assert (traj.reward, traj.checks["passed"], traj.checks["total"]) == (0.0, 0, 5)
        assert len(traj.turns) == 3 and [s.reason for s in traj.segments] == ["start"]
        assert "ShellPilot" in traj.messages[0]["content"]  # the harness's own system prompt, not t1's
        assert_no_drift(traj, engine)
    assert trajs[0].turns[0].sampled_ids != trajs[1].turns[0].sampled_ids  # each episode its own sampling stream


def test_the_example_harness_runs_a_tool_call_through_the_shell_api(tiny):
    """With ``--tools``: a Hermes tool call from a scripted engine (OracleEngine) reaches the example harness as an
    OpenAI tool call, the harness runs it through the exec API (HTTP, from its subprocess), and the verifier credits
    what it did: the directory check, 1 of 5. The tool's answer extends the session."""
    _, tokenizer = tiny
    call = '<tool_call>{"name": "bash", "arguments": {"command": "mkdir -m 750 /app/greetings"}}</tool_call>'
    oracle = RecordingEngine(OracleEngine(tokenizer, {"Set up a small greeting area": [call, "done"]}))
    [traj] = runner(oracle, tokenizer, EXAMPLE + " --tools --max-steps 4").run([EpisodeSpec("hello-file", 0)])
    assert traj.error is None, traj.metadata.get("harness_stderr")
    assert traj.metadata["commands"] == 1 and traj.termination == "submit"
    assert (traj.reward, traj.checks["passed"], traj.checks["total"]) == (1.0, 1, 5)
    assert len(traj.turns) == 2 and [s.reason for s in traj.segments] == ["start"]
    assert tokenizer.decode(traj.turns[0].bridge_ids).startswith("\n<|im_start|>tool\nOutput:")
    assert_no_drift(traj, oracle)


def test_a_harness_that_rewrites_its_history_gets_new_segments(tiny, engine):
    [traj] = runner(engine, tiny[1], "harness_agents:ForgetfulAgent").run([EpisodeSpec("hello-file", 0)])
    assert len(traj.turns) == 4 and traj.termination == "submit"
    assert [(s.first_turn, s.reason) for s in traj.segments] == [(0, "start"), (2, "non_prefix"), (3, "non_prefix")]
    assert_no_drift(traj, engine)


def test_a_harness_that_exits_non_zero_is_an_error_episode_still_scored(tiny, engine):
    [traj] = runner(engine, tiny[1], "echo broken >&2; exit 3").run([EpisodeSpec("hello-file", 0)])
    assert traj.termination == "error" and "code 3" in traj.error and "broken" in traj.error
    assert traj.checks["total"] == 5 and not traj.turns


def test_one_training_step_on_the_recorded_episodes(tiny, tmp_path):
    """``agent: harness`` in the trainer's config: its rollout runs the harness through the recording endpoint on
    its own engine. A harness that passes one check on seed 0 and none on seed 1 (where it rewrites its history:
    two segments): a group with rewards 1 and 0. The trainer scores the recorded trajectories, one row per
    segment (its log-probs match the sampler's), and its loss has a non-zero gradient."""
    model, tokenizer = tiny
    config = tiny_config(
        tmp_path,
        algorithm="grpo",
        per_device_train_batch_size=2,
        router_aux_loss_coef=0.0,
        train_seeds=[0],
        agent="harness",
        harness="harness_agents:PartialAgent",
        max_turns=6,
        rollout_concurrency=2,
    )
    trainer = T1Trainer(copy.deepcopy(model), config, processing_class=tokenizer, make_env=make_env_factory("local"))
    trajs = trainer.rollout([EpisodeSpec("hello-file", 0), EpisodeSpec("hello-file", 1)])
    assert [t.reward for t in trajs] == [1.0, 0.0] and [t.num_segments for t in trajs] == [1, 2]
    assert all(t.turns[-1].reward == t.reward for t in trajs)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    batch = trainer.score_trajectories(trajs, [{"prompt": "p", "task": "hello-file", "seed": t.seed} for t in trajs])
    metrics = batch.pop("_metrics")
    assert metrics["t1/tito_drift_tokens"] == 0.0
    assert metrics["off_policy/train_inference_abs_dlogp"] < 1e-3  # the recorded log-probs are the policy's
    advantages = batch["advantages"].sum(dim=1)  # rows: episode 0, then episode 1's two segments
    assert len(advantages) == 3 and advantages[0] > 0 > advantages[1] and advantages[2] < 0
    loss = trainer.compute_loss(trainer.model, batch)
    loss.backward()
    grads = [p.grad for p in trainer.model.parameters() if p.grad is not None]
    assert grads and any(g.abs().sum() > 0 for g in grads) and torch.isfinite(loss)


@pytest.mark.parametrize(
    "harness,message",
    [
        ("  ", "rollout.harness is empty"),
        ("nosuch.module:Agent", "cannot import 'nosuch.module'"),
        ("t1train.harness:Missing", "has no class 'Missing' with a run(context) method"),
    ],
)
def test_a_bad_harness_is_an_error_that_says_what_to_give(harness, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        HarnessConfig(harness)


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"agent": "bot"}, "agent must be 'loop' or 'harness', got 'bot'"),
        ({"agent": "harness"}, "rollout.harness is empty"),
        ({"agent": "harness", "harness": "nosuch.module:Agent"}, "cannot import 'nosuch.module'"),
    ],
)
def test_the_trainer_config_checks_the_harness_before_any_episode(tmp_path, kw, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        tiny_config(tmp_path, **kw)
