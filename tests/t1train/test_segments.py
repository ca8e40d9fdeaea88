"""Trajectory segments (format version 2): views, the one-segment contract, JSONL round trip, v1 lines."""

import json

import pytest

from t1train.trajectory import (
    Segment,
    Trajectory,
    Turn,
    load_jsonl,
    save_jsonl,
    to_dataset,
    training_record,
    training_records,
)


def turn(prompt_len, sampled, bridge=(), reward=0.0, routed=None, start=None, prompt_routed=None):
    return Turn(
        prompt_len=prompt_len,
        sampled_ids=list(sampled),
        logprobs=[-0.1 * (i + 1) for i in range(len(sampled))],
        finish_reason="stop",
        bridge_ids=list(bridge),
        routed_experts=routed,
        routed_experts_start=start,
        prompt_routed_experts=prompt_routed,
        reward=reward,
        action={"kind": "command", "command": "ls"},
    )


def two_segments():
    """Segment 0: prompt [1, 2], turns 0-1; segment 1 (rebuilt context): prompt [1, 2, 9, 9], turn 2."""
    turns = [
        turn(2, [10, 11], [3, 4], routed=[[[1]], [[2]]]),
        turn(6, [12], [], reward=0.5, routed=[[[3]]], start=3, prompt_routed=[[[7]], [[8]]]),
        turn(4, [13, 14], [], reward=2.0, routed=[[[4]], [[5]]], start=3, prompt_routed=[]),
    ]
    return Trajectory(
        task_id="t",
        seed=1,
        prompt_ids=[1, 2],
        turns=turns,
        reward=2.5,
        termination="submit",
        segments=[Segment([1, 2], 0, "start"), Segment([1, 2, 9, 9], 2, "drop_observations")],
    )


def test_a_plain_trajectory_is_one_segment_with_the_old_view():
    t = Trajectory(task_id="t", seed=None, prompt_ids=[5, 6], turns=[turn(2, [7, 8], [9]), turn(5, [10])])
    assert t.segments == [Segment([5, 6], 0, "start")] and t.num_segments == 1
    (view,) = t.segment_views()
    assert view.token_ids() == t.token_ids() == [5, 6, 7, 8, 9, 10]
    assert view.loss_mask() == t.loss_mask() == [0, 0, 1, 1, 0, 1]
    assert training_record(t)["input_ids"] == [5, 6, 7, 8, 9, 10]


def test_segment_views_split_turns_and_keep_each_prompt():
    t = two_segments()
    v0, v1 = t.segment_views()
    assert (v0.index, v0.reason, len(v0.turns), v1.index, v1.reason, len(v1.turns)) == (
        0,
        "start",
        2,
        1,
        "drop_observations",
        1,
    )
    assert v0.token_ids() == [1, 2, 10, 11, 3, 4, 12]
    assert v0.loss_mask() == [0, 0, 1, 1, 0, 0, 1]
    assert v0.sampler_logprobs() == pytest.approx([0, 0, -0.1, -0.2, 0, 0, -0.1])
    assert v1.token_ids() == [1, 2, 9, 9, 13, 14]
    assert v1.loss_mask() == [0, 0, 0, 0, 1, 1]
    assert v1.routed_experts() == [[[4]], [[5]]]
    # routing positions are relative to the segment: turn 2's rows start at position 3 of segment 1
    rows, recorded = v1.routed_experts_by_position()
    assert rows == [[[0]], [[0]], [[0]], [[4]], [[5]], [[0]]]
    assert recorded == [False, False, False, True, True, False]
    rows0, recorded0 = v0.routed_experts_by_position()
    assert rows0[1:6] == [[[1]], [[2]], [[7]], [[8]], [[3]]] and recorded0 == [False] + [True] * 5 + [False]


def test_multi_segment_whole_sequence_methods_refuse():
    t = two_segments()
    for method in (t.token_ids, t.loss_mask, t.sampler_logprobs, t.routed_experts, t.routed_experts_by_position):
        with pytest.raises(ValueError, match="segment_views"):
            method()
    with pytest.raises(ValueError, match="training_records"):
        training_record(t)


def test_segments_must_start_at_the_prompt_and_increase():
    with pytest.raises(ValueError, match="segment 0"):
        Trajectory(task_id="t", seed=None, prompt_ids=[1], segments=[Segment([2], 0)])
    with pytest.raises(ValueError, match="must increase"):
        Trajectory(task_id="t", seed=None, prompt_ids=[1], segments=[Segment([1], 0), Segment([3], 0, "summary")])


def test_training_records_one_row_per_segment_with_episode_reward():
    t = two_segments()
    recs = training_records(t)
    assert [r["segment"] for r in recs] == [0, 1] and {r["num_segments"] for r in recs} == {2}
    assert [r["turn_rewards"] for r in recs] == [[0.0, 0.5], [2.0]]
    assert {r["reward"] for r in recs} == {2.5} and {r["num_turns"] for r in recs} == {3}
    ds = to_dataset([t, Trajectory(task_id="u", seed=None, prompt_ids=[5], turns=[turn(1, [6])])])
    assert len(ds) == 3
    assert ds[1]["input_ids"] == [1, 2, 9, 9, 13, 14] and ds[2]["task_id"] == "u" and ds[2]["num_segments"] == 1


def test_v2_round_trip_and_v1_line_loads_as_one_segment(tmp_path):
    path = tmp_path / "traj.jsonl"
    t = two_segments()
    save_jsonl([t], path)
    line = json.loads(path.read_text())
    assert line["format_version"] == 2 and line["segments"][1] == {
        "prompt_ids": [1, 2, 9, 9],
        "first_turn": 2,
        "reason": "drop_observations",
    }
    assert load_jsonl(path) == [t]
    v1 = Trajectory(task_id="old", seed=0, prompt_ids=[5, 6], turns=[turn(2, [7])]).to_dict()
    del v1["segments"]
    v1["format_version"] = 1
    path.write_text(json.dumps(v1) + "\n")
    (old,) = load_jsonl(path)
    assert old.segments == [Segment([5, 6], 0, "start")] and old.token_ids() == [5, 6, 7]


# ------------------------------------------------------------------------------------------------ GAE over segments
def test_gae_bootstrap_by_hand():
    """One row, gamma 0.5, lam 0.5: the last action token bootstraps from the given value and advantage."""
    import torch

    from t1train import ppo

    mask = torch.tensor([[1.0, 0.0, 1.0]])
    values = torch.tensor([[1.0, 7.0, 2.0]])
    rewards = torch.tensor([[0.0, 0.0, 1.0]])
    adv, ret = ppo.gae(rewards, values, mask, 0.5, 0.5, torch.tensor([4.0]), torch.tensor([2.0]))
    # t=2: delta = 1 + 0.5*4 - 2 = 1; adv = 1 + 0.25*2 = 1.5.  t=0: delta = 0 + 0.5*2 - 1 = 0; adv = 0 + 0.25*1.5
    assert adv.tolist() == [[0.375, 0.0, 1.5]] and ret.tolist() == [[1.375, 0.0, 3.5]]
    plain, _ = ppo.gae(rewards, values, mask, 0.5, 0.5)  # default: the row ends the episode
    assert plain.tolist() == [[-0.25, 0.0, -1.0]]  # t=2: delta = 1 - 2; t=0: 0 + 0.25 * -1


def test_segment_gae_equals_gae_over_the_episode_laid_end_to_end():
    import torch

    from t1train import ppo

    torch.manual_seed(0)
    # episode A in rows 2 -> 0 -> 3 (three segments, out of order), episode B in row 1 alone
    mask = torch.tensor([[1, 1, 0, 1, 0], [1, 0, 1, 1, 0], [0, 1, 1, 0, 0], [1, 0, 0, 1, 1]], dtype=torch.float32)
    values, rewards = torch.randn(4, 5) * mask, torch.randn(4, 5) * mask
    adv, ret = ppo.segment_gae(rewards, values, mask, [3, -1, 0, -1], gamma=0.9, lam=0.8)
    order = [2, 0, 3]
    cat = [torch.cat([t[r][mask[r].bool()] for r in order])[None] for t in (rewards, values)]
    whole_adv, whole_ret = ppo.gae(cat[0], cat[1], torch.ones_like(cat[0]), 0.9, 0.8)
    assert torch.allclose(torch.cat([adv[r][mask[r].bool()] for r in order]), whole_adv[0])
    assert torch.allclose(torch.cat([ret[r][mask[r].bool()] for r in order]), whole_ret[0])
    alone, _ = ppo.gae(rewards[1:2], values[1:2], mask[1:2], 0.9, 0.8)
    assert torch.allclose(adv[1:2], alone)


# ------------------------------------------------------------------------------------------------ trainer rows
def segmented_episodes(tok, seeds=(0, 1, 0, 1)):
    """Episodes of 10 turns in a 600-token context under drop_observations (3+ segments each); seed 0's policy
    runs ``touch a`` (reward 1 of the scripted env's 2 checks), seed 1's ``echo`` (reward 0)."""
    from t1train.engines.base import SamplingParams
    from t1train.rollout import EpisodeSpec, RolloutConfig, RolloutRunner

    from .test_context_policy import ScriptedEngine, VerboseEnv

    class Toucher(ScriptedEngine):
        def reply(self, prompt, n):
            return "```bash\ntouch a\n```" if "(seed 0)" in self.tok.decode(prompt[:60]) else f"```bash\necho {n}\n```"

    config = RolloutConfig(
        system_prompt="Use ```bash blocks.",
        max_turns=10,
        max_context_tokens=600,
        context_policy="drop_observations",
        keep_last_turns=1,
    )
    runner = RolloutRunner(Toucher(tok), tok, lambda t: VerboseEnv(t), SamplingParams(max_new_tokens=24), config)
    return runner.run([EpisodeSpec("scripted", s) for s in seeds])


def segment_trainer(tiny, tmp_path, **kw):
    import copy

    from t1train.trainer import T1Trainer

    from .conftest import ScriptedEnv, tiny_config

    model, tok = tiny
    cfg = tiny_config(tmp_path / "out", **kw)
    return T1Trainer(copy.deepcopy(model), cfg, processing_class=tok, make_env=lambda t: ScriptedEnv(t))


def rows_of(batch, episode):
    return [r for r, e in enumerate(batch["episode_index"].tolist()) if e == episode]


def test_segment_rows_carry_their_prompt_and_the_episode_advantage(tiny, tmp_path, one_thread):
    """PPO: one row per segment with that segment's prompt, ids, mask and sampler log-probs; the rows padded to a
    multiple of steps_per_generation; GAE over an episode's segments equals GAE over its action tokens laid end to
    end (the critic's lambda-1 returns are the episode reward on every action token of every segment)."""
    import torch

    from t1train import ppo

    _, tok = tiny
    trajs = segmented_episodes(tok)
    assert [t.reward for t in trajs] == [1.0, 0.0, 1.0, 0.0] and all(t.num_segments >= 3 for t in trajs)
    trainer = segment_trainer(
        tiny, tmp_path, steps_per_generation=3, gradient_accumulation_steps=3, per_device_train_batch_size=2,
        num_generations=2, train_seeds=[0, 1, 2], whiten_advantages=False, off_policy_correction="none", gamma=0.99,
        gae_lambda_actor=0.9,
    )  # fmt: skip
    batch = trainer.score_trajectories(trajs, [{"prompt": "s", "task": "scripted", "seed": s} for s in (0, 1, 0, 1)])
    rows = batch["prompt_ids"].shape[0]
    assert rows % 3 == 0 and rows >= sum(t.num_segments for t in trajs)
    for r in rows_of(batch, -1):  # padding: nothing to learn
        assert batch["tool_mask"][r].sum() == 0 and batch["advantages"][r].abs().sum() == 0
    assert batch["num_items_in_batch"] == sum(len(turn.sampled_ids) for t in trajs for turn in t.turns)
    assert batch["_metrics"]["t1/segments_mean"] == sum(t.num_segments for t in trajs) / 4
    for e, traj in enumerate(trajs):
        mine, views = rows_of(batch, e), traj.segment_views()
        assert len(mine) == len(views)
        acts = []
        for r, view in zip(mine, views):
            prompt = batch["prompt_ids"][r][batch["prompt_mask"][r].bool()].tolist()
            completion = batch["completion_ids"][r][batch["completion_mask"][r].bool()].tolist()
            n, w = len(prompt), len(completion)
            assert prompt == view.prompt_ids and prompt + completion == view.token_ids()
            assert batch["tool_mask"][r][:w].tolist() == view.loss_mask()[n:]
            assert batch["sampling_per_token_logps"][r][:w].tolist() == pytest.approx(view.sampler_logprobs()[n:])
            acts.append(batch["tool_mask"][r].bool())
        values = torch.cat([batch["old_values"][r][m] for r, m in zip(mine, acts)])
        rewards = torch.zeros_like(values)
        rewards[-1] = traj.reward
        whole, _ = ppo.gae(rewards[None], values[None], torch.ones_like(values)[None], 0.99, 0.9)
        assert torch.allclose(torch.cat([batch["advantages"][r][m] for r, m in zip(mine, acts)]), whole[0], atol=1e-5)
        _, target = ppo.gae(rewards[None], values[None], torch.ones_like(values)[None], 0.99, 1.0)
        returns = torch.cat([batch["returns"][r][m] for r, m in zip(mine, acts)])
        # lambda 1: the discounted episode reward, whatever the critic says at segment boundaries
        expected = traj.reward * 0.99 ** torch.arange(len(values) - 1, -1, -1, dtype=values.dtype)
        assert torch.allclose(returns, target[0], atol=1e-5) and torch.allclose(returns, expected, atol=1e-4)


def test_group_advantages_are_per_episode_and_shared_by_its_segments(tiny, tmp_path, one_thread):
    import torch

    _, tok = tiny
    trajs = segmented_episodes(tok)
    trainer = segment_trainer(
        tiny, tmp_path, algorithm="grpo", num_generations=2, scale_rewards="none", off_policy_correction="none"
    )
    batch = trainer.score_trajectories(trajs, [{"prompt": "s", "task": "scripted", "seed": s} for s in (0, 1, 0, 1)])
    for e, expected in enumerate([0.5, -0.5, 0.5, -0.5]):  # each group: seed 0 (reward 1) and seed 1 (reward 0)
        for r in rows_of(batch, e):
            act = batch["tool_mask"][r].bool()
            assert act.any() and torch.allclose(batch["advantages"][r][act], torch.tensor(expected), atol=1e-3)
            assert (batch["advantages"][r][~act] == 0).all()


def test_one_trainer_step_on_multi_segment_episodes(tiny, tmp_path, one_thread):
    """The real loop: the tiny model samples 8-turn episodes in a 160-token context (drop_observations), the
    trainer scores them as segment rows (padded to steps_per_generation) and takes an optimizer step."""
    trainer = segment_trainer(
        tiny, tmp_path, algorithm="grpo", max_turns=8, max_context_tokens=160, context_policy="drop_observations",
        keep_last_turns=1, per_device_train_batch_size=2, steps_per_generation=2, num_generations=2,
        router_aux_loss_coef=0.0,
    )  # fmt: skip
    trainer.train()
    logs = trainer.state.log_history[0]
    assert trainer.state.global_step == 1
    assert logs["t1/segments_mean"] > 1 and logs["t1/tito_drift_tokens"] == 0
    # evaluation (t1train eval, the periodic and before/after ones) plays under the same context policy
    trainer.evaluate_episodes(["scripted"], [0], episodes_per_task=2)
    log = [json.loads(line) for line in (tmp_path / "out" / "trajectories.jsonl").read_text().splitlines()]
    evals = [r for r in log if r["metadata"]["phase"] == "eval"]
    assert len(evals) == 2 and all(len(r["segments"]) > 1 for r in evals)


@pytest.mark.parametrize(
    "algorithm, loss_type", [("grpo", "grpo"), ("grpo", "bnpo"), ("grpo", "dapo"), ("ppo", "dapo")]
)
def test_chunked_loss_has_the_unchunked_gradient(tiny, tmp_path, one_thread, algorithm, loss_type):
    """loss_chunk_tokens: the micro-batch's segment rows go through forward and backward a few rows at a time; the
    policy's (and the critic's) gradient and the reported loss equal one pass over all rows (float tolerance)."""
    import torch

    _, tok = tiny
    trajs = segmented_episodes(tok)
    trainer = segment_trainer(
        tiny, tmp_path, algorithm=algorithm, loss_type=loss_type, num_generations=2, off_policy_correction="none",
        router_aux_loss_coef=0.0, beta=0.0, critic_warmup_iterations=0,
    )  # fmt: skip
    batch = trainer.score_trajectories(trajs, [{"prompt": "s", "task": "scripted", "seed": s} for s in (0, 1, 0, 1)])
    batch.pop("_metrics")
    trainer.current_gradient_accumulation_steps = 1
    rows, width = batch["prompt_ids"].shape[0], batch["prompt_ids"].shape[1] + batch["completion_ids"].shape[1]
    models = [trainer.model] + ([trainer.value_model] if trainer.value_model is not None else [])

    def gradient(budget):
        trainer.args.loss_chunk_tokens = budget
        for m in models:
            m.zero_grad(set_to_none=True)
        loss = trainer.compute_loss(trainer.model, batch)
        trainer.accelerator.backward(loss)
        grads = [p.grad.clone() for m in models for p in m.parameters() if p.grad is not None]
        return loss.item(), grads, len(trainer._loss_chunks(batch))

    whole, whole_grads, one = gradient(0)
    chunked, chunked_grads, chunks = gradient(3 * width)  # 3 rows a chunk
    assert rows >= 12 and one == 1 and chunks == -(-rows // 3)
    assert chunked == pytest.approx(whole, rel=1e-5, abs=1e-7)
    assert len(chunked_grads) == len(whole_grads) > 0
    for a, b in zip(whole_grads, chunked_grads):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)


def test_loss_chunks_refuse_whole_batch_statistics(tmp_path):
    from .conftest import tiny_config

    with pytest.raises(ValueError, match="loss_chunk_tokens cannot be combined with top_entropy_quantile"):
        tiny_config(tmp_path, loss_chunk_tokens=4096, top_entropy_quantile=0.5)
    with pytest.raises(ValueError, match="loss_chunk_tokens must be >= 0"):
        tiny_config(tmp_path, loss_chunk_tokens=-1)
