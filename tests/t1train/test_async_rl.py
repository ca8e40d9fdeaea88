"""Asynchronous training (t1train/async_rl.py): the producer's staleness bookkeeping made deterministic by letting it
run dry before the trainer takes (``wait_idle``), and three real async training steps of the tiny model on the
scripted env."""

from __future__ import annotations

import copy
import json
import re
import threading
from pathlib import Path

import pytest
import torch

from t1train.async_rl import AsyncConfig, AsyncRollouts
from t1train.config import build_t1_config, load_train_config
from t1train.engines.base import SamplingParams
from t1train.engines.hf import HFEngine
from t1train.rollout import RolloutConfig, RolloutRunner
from t1train.trainer import T1Trainer
from t1train.trajectory import Trajectory

from .conftest import tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


# ------------------------------------------------------------------------------------------------ config
def test_async_key_of_the_yaml_and_its_errors(tmp_path):
    base = {"output_dir": str(tmp_path), "tasks": ["scripted"], "use_cpu": True}
    cfg = build_t1_config({**base, "async": {"max_staleness": 2, "stale": "downweight"}})
    assert cfg.async_config() == AsyncConfig(max_staleness=2, stale="downweight")
    assert build_t1_config(base).async_config() is None  # synchronous by default
    with pytest.raises(ValueError, match=r"async\.max_stalenes: unknown key \(known: max_staleness, stale"):
        build_t1_config({**base, "async": {"max_stalenes": 2}})
    with pytest.raises(ValueError, match="async.stale must be one of drop, downweight"):
        build_t1_config({**base, "async": {"stale": "keep"}})
    with pytest.raises(ValueError, match="async.max_staleness must be an integer >= 0"):
        build_t1_config({**base, "async": {"max_staleness": -1}})
    with pytest.raises(ValueError, match="set off_policy_correction: none"):
        build_t1_config({**base, "off_policy_loss": "dppo"})
    shipped = load_train_config("async-tiny-cpu")  # the example recipe (t1train/configs/async-tiny-cpu.yaml)
    cfg = build_t1_config({**shipped.train, "output_dir": str(tmp_path)})
    assert cfg.async_config().max_staleness == 2 and cfg.off_policy_loss == "adaptive_trust_region"


# ------------------------------------------------------------------------------------------------ producer
@pytest.mark.parametrize("stale", ["drop", "downweight"])
def test_stale_groups_are_dropped_or_downweighted_and_counted(tiny, scripted_env, stale):
    """max_staleness 1, one group per step: at version 0 the producer may start two groups, plays them on weights
    version 0 and stops. The trainer then takes at version 3: both groups are 3 versions behind."""
    model, tokenizer = tiny
    engine = HFEngine(model, tokenizer)
    envs = []

    def make_env(task):
        envs.append(scripted_env(task))
        return envs[-1]

    runner = RolloutRunner(
        engine,
        tokenizer,
        make_env,
        SamplingParams(max_new_tokens=4, seed=0),
        RolloutConfig(max_turns=1, system_prompt="Act."),
    )
    producer = AsyncRollouts(
        lambda more, on_episode: runner.run([], on_episode, more),
        rows=[("scripted", 0), ("scripted", 1)],
        num_generations=2,
        groups_per_step=1,
        config=AsyncConfig(max_staleness=1, stale=stale, stale_weight=0.5),
    )
    try:
        producer.start()
        assert producer.wait_idle(timeout=300)
        assert len(envs) == 4  # two groups of two, and no more: admission is closed at version 0
        engine.weight_version = "3"  # three optimizer steps later (the trainer's sync sets it)
        taken = producer.take(3)
    finally:
        producer.stop()
    assert all(env.closed for env in envs)
    [group] = taken.groups
    if stale == "drop":
        assert len(taken.dropped) == 2
        for old in taken.dropped:  # dropped, not trained on: played on version 0
            assert [t.metadata["staleness"] for t in old.trajectories] == [3, 3]
            assert all(t.metadata["weight_versions"] == [0] for t in old.trajectories)
        assert [t.metadata["weight_versions"] for t in group.trajectories] == [[3], [3]]  # played after the take
        assert taken.weights == [1.0, 1.0]
        assert taken.metrics["async/dropped_episodes"] == 4.0 and taken.metrics["async/staleness_0"] == 2.0
        assert producer.totals["dropped_episodes"] == 4
    else:
        assert taken.dropped == []
        assert [t.metadata["staleness"] for t in group.trajectories] == [3, 3]
        assert taken.weights == [0.25, 0.25]  # 0.5 ** (3 - 1)
        assert taken.metrics["async/downweighted_episodes"] == 2.0 and taken.metrics["async/staleness_over"] == 2.0
        assert taken.metrics["async/dropped_episodes"] == 0.0
    for key in ("async/trainer_idle_fraction", "async/sampler_idle_fraction"):
        assert 0.0 <= taken.metrics[key] <= 1.0


def test_stop_abandons_the_episodes_in_flight_and_closes_their_envs(tiny, scripted_env):
    """Every env's reset blocks until released: stop() is called with the whole first batch in flight; once the
    resets return, the next generate call ends the agent loop, which closes every env."""
    model, tokenizer = tiny
    release, both_made, envs = threading.Event(), threading.Event(), []

    class BlockingEnv(scripted_env):
        def reset(self, seed=None):
            release.wait()
            return super().reset(seed)

    def make_env(task):
        envs.append(BlockingEnv(task))
        if len(envs) == 2:
            both_made.set()
        return envs[-1]

    runner = None
    producer = AsyncRollouts(
        lambda more, on_episode: runner.run([], on_episode, more),
        rows=[("scripted", 0)],
        num_generations=2,
        groups_per_step=1,
        config=AsyncConfig(max_staleness=0),
    )
    runner = RolloutRunner(
        producer.stoppable(HFEngine(model, tokenizer)),
        tokenizer,
        make_env,
        SamplingParams(max_new_tokens=4, seed=0),
        RolloutConfig(max_turns=1, system_prompt="Act."),
    )
    producer.start()
    assert both_made.wait(timeout=300)  # the group is in flight, its resets blocked
    stopper = threading.Thread(target=producer.stop)
    stopper.start()
    with producer._cond:  # stop() has said stop (it now waits for the producer thread) before the resets return
        assert producer._cond.wait_for(lambda: producer._stop, timeout=300)
    release.set()
    stopper.join(timeout=300)
    assert not stopper.is_alive()
    assert len(envs) == 2 and all(env.closed for env in envs)
    assert not producer._finished and producer._error is None  # abandoned, not finished, not an error


def test_producer_errors_reach_the_trainer(tiny):
    def play(more, on_episode):
        more()
        raise OSError("engine went away")

    producer = AsyncRollouts(play, [("scripted", 0)], 1, 1, AsyncConfig())
    with pytest.raises(RuntimeError, match="async rollout producer failed: OSError"):
        producer.take(0)
    producer.stop()


# ------------------------------------------------------------------------------------------------ trainer
def sampled_tokens(trajectory, **kwargs) -> list[float]:
    """A reward that varies between the scripted env's episodes (whose checks all fail): the policy moves."""
    return [float(sum(len(turn.sampled_ids) for turn in t.turns)) for t in trajectory]


def test_three_async_steps_with_staleness_2(tiny, tmp_path, scripted_env, capsys):
    model, tokenizer = tiny
    args = tiny_config(tmp_path / "out", max_steps=3, async_rl={"max_staleness": 2}, router_aux_loss_coef=0.0)
    trainer = T1Trainer(
        copy.deepcopy(model),
        args,
        processing_class=tokenizer,
        make_env=lambda t: scripted_env(t),
        reward_funcs=[sampled_tokens],
    )
    assert trainer.engine.model is not trainer.model  # the sampler has parameters of its own
    initial = {n: p.detach().clone() for n, p in trainer.engine.model.named_parameters()}
    trainer.train()
    assert trainer.async_rollouts is None  # stopped with the run

    # every episode trained on at step s was sampled by versions s-2..s, and says so
    records = [json.loads(line) for line in (Path(args.output_dir) / "trajectories.jsonl").read_text().splitlines()]
    trained = [r for r in records if r["metadata"]["phase"] == "train"]
    assert sorted({r["metadata"]["step"] for r in trained}) == [0, 1, 2] and len(trained) == 12
    for r in trained:
        meta, step = r["metadata"], r["metadata"]["step"]
        versions = [int(turn["weight_version"]) for turn in r["turns"]]
        assert versions and meta["weight_versions"] == sorted(set(versions))
        assert meta["policy_version"] == step and meta["staleness"] == step - min(versions) <= 2
        assert all(v <= step for v in versions)

    # the staleness metrics, per step: the histogram counts the batch's 4 episodes
    logs = [h for h in trainer.state.log_history if "async/staleness_mean" in h]
    assert len(logs) == 3
    for h in logs:
        assert sum(h[f"async/staleness_{k}"] for k in range(3)) == 4
        assert h["async/dropped_episodes"] >= 0 and 0 <= h["async/trainer_idle_fraction"] <= 1
    out = capsys.readouterr()
    assert re.search(r"^step 3  .*stale \d\.\d\d  dropped \d+ .*behind 0:\d/1:\d/2:\d", out.out + out.err, re.M)

    # the weights reached the engine: version 2 at the last step's take, moved from the initial ones
    assert trainer.engine.weight_version == "2"
    assert any(not torch.equal(initial[n], p) for n, p in trainer.engine.model.named_parameters())
    trainer.sync_engine_weights()
    policy = dict(trainer.model.named_parameters())
    assert trainer.engine.weight_version == "3"
    assert all(torch.equal(policy[n], p) for n, p in trainer.engine.model.named_parameters())


def even_tokens(trajectory, **kwargs) -> list[float]:
    """A reward the tiny model's samples vary in, and that a policy can learn: how many sampled ids are even."""
    return [float(sum(i % 2 == 0 for turn in t.turns for i in turn.sampled_ids)) for t in trajectory]


def test_staleness_0_trains_exactly_what_sync_trains_on_the_same_episodes(tiny, tmp_path, scripted_env):
    """The check issue 29's one-seed learning run called for: ``max_staleness: 0`` is the synchronous schedule
    through the async path (its own engine copy, the producer thread, take/score). Two async steps are played; a
    synchronous trainer is then fed exactly those episodes, step by step. Same episodes -> the same weights, bit for
    bit; and every sampled token's log-prob under the trainer equals the sampler's (the copy has the policy's
    weights and mode at each version). So a gap between async s0 and sync in a learning run is in *which* episodes
    were sampled (seeds), not in how they are trained on."""
    model, tokenizer = tiny
    common = dict(max_steps=2, router_aux_loss_coef=0.0)
    a_args = tiny_config(tmp_path / "async", async_rl={"max_staleness": 0}, **common)
    a = T1Trainer(
        copy.deepcopy(model), a_args, processing_class=tokenizer, make_env=scripted_env, reward_funcs=[even_tokens]
    )
    a.train()
    records = [json.loads(line) for line in (Path(a_args.output_dir) / "trajectories.jsonl").read_text().splitlines()]
    played = {}
    for r in records:
        if r["metadata"]["phase"] == "train":
            played.setdefault(r["metadata"]["step"], []).append(r)
    assert sorted(played) == [0, 1] and all(len(v) == 4 for v in played.values())

    class Replay(T1Trainer):
        def rollout(self, specs, sampling=None, phase="train", first_index=0):
            episodes = sorted(played[self.state.global_step], key=lambda r: r["metadata"]["episode"])
            return [Trajectory.from_dict(r) for r in episodes]

    b = Replay(
        copy.deepcopy(model),
        tiny_config(tmp_path / "sync", **common),
        processing_class=tokenizer,
        make_env=scripted_env,
        reward_funcs=[even_tokens],
    )
    b.train()
    logs_a = [h for h in a.state.log_history if "reward" in h]
    logs_b = [h for h in b.state.log_history if "reward" in h]
    assert [h["reward"] for h in logs_a] == [h["reward"] for h in logs_b]
    assert any(h["grad_norm"] > 0 for h in logs_a)  # the policy moved: the comparison is not between two no-ops
    assert all(h["off_policy/train_inference_abs_dlogp"] < 1e-5 for h in logs_a)
    mine = dict(b.model.named_parameters())
    assert all(torch.equal(p, mine[n]) for n, p in a.model.named_parameters())


def test_async_refuses_an_engine_that_shares_the_policy(tiny, tmp_path, scripted_env):
    """The producer samples while the optimizer updates the policy in place (and TRL switches it to train mode): an
    HF engine over the policy object itself would sample from weights that change under it mid-episode."""
    model, tokenizer = tiny
    policy = copy.deepcopy(model)
    args = tiny_config(tmp_path, async_rl={"max_staleness": 1})
    with pytest.raises(ValueError, match="async training needs an engine with weights of its own"):
        T1Trainer(policy, args, processing_class=tokenizer, make_env=scripted_env, engine=HFEngine(policy, tokenizer))


def test_async_on_processes_that_cannot_take_whole_groups_is_a_clear_error(tiny, tmp_path, scripted_env, monkeypatch):
    """Under torchrun each process takes whole groups of its own: a per-process generation batch that is not a
    multiple of num_generations stops the trainer at once, saying which setting to change."""
    import accelerate

    model, tokenizer = tiny
    monkeypatch.setattr(accelerate.Accelerator, "num_processes", property(lambda self: 2))
    args = tiny_config(tmp_path, async_rl={"max_staleness": 1}, per_device_train_batch_size=2)
    with pytest.raises(ValueError, match=r"must be a multiple of num_generations \(2\); set per_device_train_batch"):
        T1Trainer(copy.deepcopy(model), args, processing_class=tokenizer, make_env=scripted_env)
