"""T1Trainer and T1Config: batches built from TITO trajectories, the three algorithms, critic warm-start,
off-policy correction, checkpoints, LoRA. These tests use the tiny MoE and the scripted env from conftest.py (no
sandboxes); the real-env runs are test_trainer_cli.py's end-to-end run and test_learning_curve.py (both slow)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from t1train.engines.base import SamplingParams
from t1train.rollout import EpisodeSpec, RolloutConfig, RolloutRunner
from t1train.sft import OracleEngine, oracle_turns, sft_dataset
from t1train.trainer import T1Config, T1Trainer

from .conftest import tiny_config

SCRIPT = oracle_turns("touch a")  # passes one of the scripted env's two checks


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


def config(tmp_path, **kw) -> T1Config:
    return tiny_config(tmp_path / "out", **kw)


def make_trainer(tiny, tmp_path, scripted_env, **kw):
    model, tokenizer = tiny
    import copy

    return T1Trainer(
        copy.deepcopy(model),
        config(tmp_path, **kw),
        processing_class=tokenizer,
        make_env=lambda task: scripted_env(task),
    )


def oracle_episodes(tokenizer, scripted_env, n=4):
    instruction = scripted_env("scripted").reset(seed=0)[0].split(" (seed")[0]
    runner = RolloutRunner(
        OracleEngine(tokenizer, {instruction: SCRIPT}),
        tokenizer,
        lambda t: scripted_env(t),
        SamplingParams(max_new_tokens=64),
        RolloutConfig(max_turns=3, system_prompt="Act."),
    )
    return runner.run([EpisodeSpec("scripted", i) for i in range(n)])


# ------------------------------------------------------------------------------------------------ config
@pytest.mark.parametrize(
    "bad,match",
    [
        (dict(algorithm="reinforce"), "algorithm must be one of"),
        (dict(algorithm="grpo", critic_warmup_iterations=2), "needs algorithm='ppo'"),
        (dict(off_policy_correction="always"), "off_policy_correction must be one of"),
        (dict(off_policy_clip=0.5), "off_policy_clip must be > 1"),
        (dict(gae_lambda_actor=1.5), "gae_lambda_actor must be in"),
        (dict(loss_type="cispo"), "ppo needs a clipped-ratio loss_type"),
        (dict(tasks=[]), "tasks is empty"),
        (dict(eval_every_steps=2), "eval_tasks is empty"),
    ],
)
def test_config_rejects_bad_values(tmp_path, bad, match):
    with pytest.raises(ValueError, match=match):
        config(tmp_path, **bad)


def test_too_few_episodes_for_a_batch_is_an_error(tiny, tmp_path, scripted_env):
    with pytest.raises(ValueError, match="distinct episodes"):
        make_trainer(tiny, tmp_path, scripted_env, train_seeds=[0])


def test_gspo_uses_sequence_level_ratios(tmp_path):
    assert config(tmp_path, algorithm="gspo").importance_sampling_level == "sequence"
    assert config(tmp_path, algorithm="grpo").importance_sampling_level == "token"


# ------------------------------------------------------------------------------------------------ batches
def test_batch_is_the_tito_trajectory_with_observations_masked(tiny, tmp_path, scripted_env):
    trainer = make_trainer(tiny, tmp_path, scripted_env, algorithm="ppo")
    trajectories = oracle_episodes(trainer.tokenizer, scripted_env)
    inputs = [{"prompt": "scripted@0", "task": "scripted", "seed": i} for i in range(4)]
    batch = trainer.score_trajectories(trajectories, inputs)
    for b, t in enumerate(trajectories):
        n = len(t.prompt_ids)
        prompt = batch["prompt_ids"][b][batch["prompt_mask"][b].bool()].tolist()
        completion = batch["completion_ids"][b][batch["completion_mask"][b].bool()].tolist()
        assert prompt == t.prompt_ids and prompt + completion == t.token_ids()  # exactly the sampled/bridge ids
        width = len(completion)
        assert batch["tool_mask"][b][:width].tolist() == t.loss_mask()[n:]
        obs = batch["tool_mask"][b] == 0
        assert (batch["advantages"][b][obs] == 0).all() and (batch["returns"][b][obs] == 0).all()
        assert t.reward == 1.0  # "touch a" passes one check
    metrics = batch["_metrics"]
    assert metrics["t1/passed_mean"] == 1.0 and metrics["t1/tito_drift_tokens"] == 0
    # the oracle's log-probs are 0 (a point mass): the trainer's are lower, so the weights are < 1 and truncated
    assert 0 < metrics["off_policy/weight_mean"] < 1


def test_shared_engine_has_no_train_inference_mismatch(tiny, tmp_path, scripted_env):
    trainer = make_trainer(tiny, tmp_path, scripted_env, algorithm="grpo")
    trajectories = trainer.rollout([EpisodeSpec("scripted", i) for i in range(4)])
    batch = trainer.score_trajectories(trajectories, [{"prompt": "s", "task": "scripted", "seed": i} for i in range(4)])
    assert batch["_metrics"]["off_policy/train_inference_abs_dlogp"] < 1e-4
    assert batch["advantages"].abs().sum() == 0  # every episode scored 0: no signal in any group


# ------------------------------------------------------------------------------------------------ training
# The router's load-balancing loss moves an MoE with no advantage at all; these tests turn it off
# (router_aux_loss_coef=0) so that whatever moves the policy is the policy gradient.
@pytest.mark.parametrize("algorithm", ["ppo", "grpo", "gspo"])
def test_one_training_step_per_algorithm(tiny, tmp_path, scripted_env, algorithm, capsys):
    """A full step (rollout, scoring, loss, optimizer) on episodes that all score 0: every advantage is 0, so the
    step must log its metrics and leave the policy exactly as it was. The terminal gets the health line, the raw
    metrics go to metrics.jsonl."""
    trainer = make_trainer(tiny, tmp_path, scripted_env, algorithm=algorithm, router_aux_loss_coef=0.0)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    out = capsys.readouterr()
    assert re.search(r"^step 1  resolved 0\.00", out.out + out.err, re.M)
    if algorithm == "ppo":  # a critic, but every return is 0: its explained variance is undefined, and said so
        assert re.search(r"^step 1  .* ev n/a ", out.out + out.err, re.M), out.out + out.err
    assert "'t1/passed_mean'" not in out.out + out.err  # TRL's raw dict is not printed under the health line
    rows = [json.loads(line) for line in (Path(trainer.args.output_dir) / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["step"] == 1 and rows[0]["t1/passed_mean"] == 0.0
    logs = trainer.state.log_history[0]
    for key in (
        "t1/passed_mean",
        "t1/resolved_rate",
        "off_policy/train_inference_abs_dlogp",
        "clip_ratio/region_mean",
        "t1/tito_drift_tokens",
        "entropy",
    ):
        assert key in logs, key
    if algorithm == "ppo":
        assert "critic/value_loss" in logs and "critic/value_mean" in logs
    assert trainer.state.global_step == 1 and logs["t1/passed_mean"] == 0.0
    assert all(torch.equal(before[n], p) for n, p in trainer.model.named_parameters())


def _token_logps(trainer, batch) -> torch.Tensor:
    """The policy's log-prob of every completion token of the batch."""
    input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention_mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, input_ids, attention_mask, batch["completion_ids"].shape[1]
        )
    return logps


def _action_logps(trainer, batch) -> torch.Tensor:
    """Per-episode sum of the policy's log-probs of its sampled action tokens."""
    return (_token_logps(trainer, batch) * batch["tool_mask"]).sum(dim=1)


def _passing_and_failing_batch(trainer, scripted_env):
    """Groups of num_generations=2, each a passing and a failing oracle episode (seeds 0, 1, 0, 1), scored."""
    tokenizer = trainer.tokenizer
    seeds = [0, 1, 0, 1]
    scripts = {"Task scripted (seed 0)": SCRIPT, "Task scripted (seed 1)": oracle_turns("ls")}
    runner = RolloutRunner(
        OracleEngine(tokenizer, scripts),
        tokenizer,
        lambda t: scripted_env(t),
        SamplingParams(max_new_tokens=64),
        RolloutConfig(max_turns=3, system_prompt="Act."),
    )
    trajectories = runner.run([EpisodeSpec("scripted", seed) for seed in seeds])
    batch = trainer.score_trajectories(trajectories, [{"prompt": "s", "task": "scripted", "seed": s} for s in seeds])
    batch.pop("returns", None)  # the critic's loss: not the policy's
    return trajectories, batch


@pytest.mark.parametrize("algorithm", ["ppo", "grpo", "gspo"])
def test_the_policy_gradient_follows_the_advantages(tiny, tmp_path, scripted_env, algorithm):
    """From rewards to a gradient step, on a batch whose groups each hold a passing and a failing episode: the step
    makes the passing episodes' actions more likely and the failing ones' less; with the advantages zeroed, the
    gradient is exactly zero."""
    trainer = make_trainer(tiny, tmp_path, scripted_env, algorithm=algorithm, router_aux_loss_coef=0.0)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # what the training loop sets before each step
    trajectories, batch = _passing_and_failing_batch(trainer, scripted_env)
    assert [t.reward for t in trajectories] == [1.0, 0.0, 1.0, 0.0]

    def gradients(inputs):
        trainer.model.zero_grad(set_to_none=True)
        trainer.compute_loss(trainer.model, inputs).backward()
        return {n: p.grad for n, p in trainer.model.named_parameters() if p.grad is not None}

    zero = gradients({**batch, "advantages": torch.zeros_like(batch["advantages"])})
    assert all(not g.any() for g in zero.values())  # no advantage, no policy gradient

    grads = gradients(batch)
    before = _action_logps(trainer, batch)
    with torch.no_grad():
        for n, p in trainer.model.named_parameters():
            if n in grads:
                p -= 0.2 * grads[n]
    change = _action_logps(trainer, batch) - before
    assert change[0] > 0 and change[2] > 0, change  # passing episodes: more likely
    assert change[1] < 0 and change[3] < 0, change  # failing episodes: less likely


def test_critic_warm_start_fits_the_critic_and_leaves_the_policy_alone(tiny, tmp_path, scripted_env):
    model, tokenizer = tiny
    instruction = scripted_env("scripted").reset(seed=0)[0].split(" (seed")[0]
    engine = OracleEngine(tokenizer, {instruction: SCRIPT})  # rewards vary by nothing: returns are all 1
    import copy

    trainer = T1Trainer(
        copy.deepcopy(model),
        config(tmp_path, critic_warmup_iterations=3, critic_warmup_epochs=2, critic_warmup_ev_threshold=2.0),
        processing_class=tokenizer,
        engine=engine,
        make_env=lambda t: scripted_env(t),
    )
    policy = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    head = trainer.value_model.head.weight.detach().clone()
    history = trainer.warm_start_critic()
    assert len(history) == 3 and trainer.critic_warmed_up
    assert history[-1]["value_loss"] < history[0]["value_loss"]  # the critic learns the return (1.0)
    assert all(torch.equal(policy[n], p) for n, p in trainer.model.named_parameters())  # no policy update
    assert not torch.equal(head, trainer.value_model.head.weight)
    assert engine.weight_version == "oracle"  # no weight sync


def test_warm_start_refits_every_round_and_is_not_held_by_the_value_clip(tiny, tmp_path, scripted_env):
    """Every round fits all warm-start batches so far (the frozen policy's samples stay valid targets), with an
    unclipped loss: a zero-initialised critic must reach returns far beyond ``cliprange_value``."""
    model, tokenizer = tiny
    instruction = scripted_env("scripted").reset(seed=0)[0].split(" (seed")[0]
    engine = OracleEngine(tokenizer, {instruction: SCRIPT})  # every return is 1.0
    import copy

    trainer = T1Trainer(
        copy.deepcopy(model),
        config(
            tmp_path,
            critic_warmup_iterations=3,
            critic_warmup_epochs=4,
            critic_warmup_ev_threshold=2.0,
            critic_learning_rate=1e-2,
            cliprange_value=0.05,
        ),
        processing_class=tokenizer,
        engine=engine,
        make_env=lambda t: scripted_env(t),
    )
    steps = []
    inner = trainer._critic_optimizer_step
    trainer._critic_optimizer_step = lambda: (steps.append(len(trainer.critic_warmup_history)), inner())
    trainer.warm_start_critic()
    # 4 episodes per batch = one minibatch: round k fits k batches, 4 passes each
    assert [steps.count(k) for k in range(3)] == [4, 8, 12]
    trajectories = trainer.rollout([EpisodeSpec("scripted", 0)] * 4)
    batch = trainer.score_trajectories(
        trajectories, [{"prompt": "s", "task": "scripted", "seed": 0}] * 4, critic_only=True
    )
    mask = batch["tool_mask"].bool()
    assert batch["old_values"][mask].mean().item() > 0.5  # 10x the value clip: the clip did not hold it back


def test_warm_start_stops_at_the_explained_variance_threshold(tiny, tmp_path, scripted_env):
    """Even seeds pass one check, odd seeds none: the critic can learn the returns from the prompt. Each round's
    explained variance is measured on a fresh batch before fitting it; the first round to reach the threshold is
    the last."""
    model, tokenizer = tiny
    scripts = {f"Task scripted (seed {s})": oracle_turns("touch a" if s % 2 == 0 else "ls") for s in range(4)}
    import copy

    trainer = T1Trainer(
        copy.deepcopy(model),
        config(
            tmp_path,
            train_seeds=[0, 1, 2, 3],
            per_device_train_batch_size=8,
            critic_warmup_iterations=8,
            critic_warmup_epochs=4,
            critic_warmup_ev_threshold=0.5,
            critic_learning_rate=3e-3,
        ),
        processing_class=tokenizer,
        engine=OracleEngine(tokenizer, scripts),
        make_env=lambda t: scripted_env(t),
    )
    evs = [r["explained_variance"] for r in trainer.warm_start_critic()]
    assert evs[0] == 0.0  # the zero-initialised head predicts nothing
    assert 1 < len(evs) < 8 and evs[-1] >= 0.5, evs  # it learned, and stopped once it reached the threshold
    assert all(ev < 0.5 for ev in evs[:-1]), evs  # and not before


def test_checkpoint_resume_restores_the_critic(tiny, tmp_path, scripted_env):
    trainer = make_trainer(
        tiny, tmp_path, scripted_env, critic_warmup_iterations=1, max_steps=1, save_strategy="steps", save_steps=1
    )
    trainer.train()
    ckpt = tmp_path / "out" / "checkpoint-1"
    assert (ckpt / "value_model.pt").exists() and (ckpt / "t1_state.json").exists()
    saved = torch.load(ckpt / "value_model.pt")
    resumed = make_trainer(tiny, tmp_path, scripted_env, critic_warmup_iterations=1, max_steps=2, save_strategy="no")
    with torch.no_grad():
        resumed.value_model.head.bias.fill_(5.0)
    resumed._load_t1_state(str(ckpt))
    assert all(torch.equal(saved[k], v) for k, v in resumed.value_model.state_dict().items())
    resumed.train(resume_from_checkpoint=True)  # the last checkpoint in output_dir
    assert resumed.state.global_step == 2 and resumed.critic_warmed_up
    assert len(resumed.critic_warmup_history) == 1  # restored, not re-run


def _kl(trainer, batch) -> float:
    """The k3 estimate of KL(policy || reference) on the batch's action tokens, as TRL's loss computes it."""
    delta = batch["ref_per_token_logps"] - _token_logps(trainer, batch)
    mask = batch["tool_mask"].bool()
    return (torch.exp(delta) - delta - 1)[mask].mean().item()


@pytest.mark.parametrize("lora", [False, True])
def test_kl_to_the_reference_pulls_the_policy_back(tiny, tmp_path, scripted_env, lora):
    """beta > 0: the reference is the policy the trainer was given (a frozen in-memory copy; with LoRA, the base
    model), its log-probs ride in the batch, and the KL term's gradient is zero at the reference and pulls a moved
    policy back towards it (a step on the KL alone lowers the KL). A full training step logs ``kl``."""
    import copy

    from peft import LoraConfig

    model, tokenizer = tiny
    policy = copy.deepcopy(model)
    with torch.no_grad():  # weights no file holds: the reference must be this model, not a reload from its path
        next(policy.parameters()).add_(0.01)
    peft = LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False) if lora else None
    trainer = T1Trainer(
        policy,
        config(tmp_path, algorithm="ppo", beta=0.5, router_aux_loss_coef=0.0),
        processing_class=tokenizer,
        make_env=lambda t: scripted_env(t),
        peft_config=peft,
    )
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    if not lora:
        reference = dict(trainer.ref_model.named_parameters())
        assert all(
            torch.equal(reference[n], p) and reference[n] is not p and not reference[n].requires_grad
            for n, p in trainer.model.named_parameters()
        )
    _, batch = _passing_and_failing_batch(trainer, scripted_env)
    batch = {**batch, "advantages": torch.zeros_like(batch["advantages"])}  # what moves the policy: the KL alone
    if not lora:  # policy == reference: the same log-probs, no KL, no gradient
        assert _kl(trainer, batch) < 1e-10
        trainer.model.zero_grad(set_to_none=True)
        trainer.compute_loss(trainer.model, batch).backward()
        assert all(not p.grad.abs().gt(1e-7).any() for p in trainer.model.parameters() if p.grad is not None)
    with torch.no_grad():  # move the policy away from the reference
        for p in trainer.model.parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn_like(p))
    moved = _kl(trainer, batch)
    assert moved > 1e-4
    trainer.model.zero_grad(set_to_none=True)
    trainer.compute_loss(trainer.model, batch).backward()
    grads = [p.grad for p in trainer.model.parameters() if p.grad is not None]
    norm = torch.sqrt(sum((g**2).sum() for g in grads))
    assert norm > 0
    with torch.no_grad():  # a short step down the KL's gradient
        for p in trainer.model.parameters():
            if p.grad is not None:
                p -= 0.02 * p.grad / norm
    assert _kl(trainer, batch) < moved
    trainer.train()
    assert "kl" in trainer.state.log_history[0]


def test_lora_trains_adapters_only(tiny, tmp_path, scripted_env):
    from peft import LoraConfig

    model, tokenizer = tiny
    import copy

    trainer = T1Trainer(
        copy.deepcopy(model),
        config(tmp_path, algorithm="grpo"),
        processing_class=tokenizer,
        make_env=lambda t: scripted_env(t),
        peft_config=LoraConfig(r=4, target_modules=["q_proj", "v_proj"]),
    )
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora" in n for n in trainable)
    trainer.train()
    assert trainer.state.global_step == 1


# ------------------------------------------------------------------------------------------------ SFT data
def test_sft_dataset_trains_on_the_oracle_action_tokens_only(tiny, scripted_env):
    _, tokenizer = tiny
    trajectories = oracle_episodes(tokenizer, scripted_env, n=2)
    row = sft_dataset(trajectories)[0]
    trained = [i for i, m in zip(row["input_ids"], row["assistant_masks"]) if m]
    end = tokenizer.eos_token
    assert tokenizer.decode(trained) == SCRIPT[0] + end + SCRIPT[1] + end


def test_a_deepcopy_of_a_model_a_trl_trainer_touched_runs_its_own_weights(tiny, tmp_path, scripted_env):
    """TRL patches ``model.forward`` with a closure over the original; a deepcopy's forward would run the original's
    weights (sampling and training on the copy would never see the copy's updates). T1Trainer strips the patch."""
    import copy

    first = make_trainer(tiny, tmp_path / "a", scripted_env)
    assert "forward" in vars(first.model)  # TRL's fused-LM-head patch
    clone = copy.deepcopy(first.model)
    ids = torch.tensor([[5, 6, 7, 8]])
    second = T1Trainer(clone, config(tmp_path / "b"), processing_class=tiny[1], make_env=lambda t: scripted_env(t))
    with torch.no_grad():
        before = second.model(ids).logits.clone()
        for p in second.model.parameters():
            p.add_(0.05)
        after = second.model(ids).logits
        original = first.model(ids).logits
    assert not torch.allclose(before, after)  # the clone's forward uses the clone's weights
    assert torch.allclose(before, original)  # and the original is untouched


def test_sft_in_place_keeps_the_trainers_own_forward_patch(tiny, tmp_path, scripted_env):
    """SFT of a trainer's policy in place (the CI learning test's order) must not strip the forward patch the
    trainer's loss relies on: only a stale patch (closing over another model) is removed."""
    model, tokenizer = tiny
    trainer = make_trainer(tiny, tmp_path, scripted_env)
    from trl import SFTConfig

    from t1train.sft import run_sft

    trajs = oracle_episodes(tokenizer, scripted_env, n=2)
    run_sft(
        trainer.model,
        tokenizer,
        sft_dataset(trajs * 4),
        SFTConfig(
            output_dir=str(tmp_path / "sft"),
            max_steps=2,
            per_device_train_batch_size=2,
            save_strategy="no",
            report_to="none",
            bf16=False,
            disable_tqdm=True,
            activation_checkpointing=True,
            dataloader_pin_memory=False,
        ),
    )
    assert "forward" in vars(trainer.model)
    trainer.train()  # TRL's loss needs its fused-LM-head forward: this raised AttributeError('log_probs') when stripped
    assert trainer.state.global_step == 1


# ------------------------------------------------------------------------------------------------ files a run leaves
def logged(tmp_path, name="trajectories.jsonl") -> list[tuple]:
    """``(phase, step, call, episode)`` of every episode in the run's log, in the order they were written."""
    from t1train.trajectory import load_jsonl

    return [
        (t.metadata["phase"], t.metadata["step"], t.metadata["call"], t.metadata["episode"])
        for t in load_jsonl(tmp_path / "out" / name)
    ]


def episodes_per(keys, phase) -> dict[int, list[int]]:
    steps: dict[int, list[int]] = {}
    for p, step, _, episode in keys:
        if p == phase:
            steps.setdefault(step, []).append(episode)
    return {s: sorted(e) for s, e in steps.items()}


def test_training_logs_every_episode_as_it_finishes(tiny, tmp_path, scripted_env):
    trainer = make_trainer(tiny, tmp_path, scripted_env, critic_warmup_iterations=1, max_steps=2)
    trainer.train()
    trainer.evaluate_episodes(["scripted"], [7], phase="eval-after")
    keys = logged(tmp_path)
    assert len(keys) == len(set(keys))
    n = trainer.args.generation_batch_size
    assert episodes_per(keys, "train") == {0: list(range(n)), 1: list(range(n))}
    assert episodes_per(keys, "warmup") == {0: list(range(n))}
    assert episodes_per(keys, "eval-after") == {2: [0]}


def test_resume_moves_the_redone_steps_aside_and_writes_no_duplicates(tiny, tmp_path, scripted_env):
    import shutil

    first = make_trainer(
        tiny, tmp_path, scripted_env, algorithm="grpo", max_steps=2, save_strategy="steps", save_steps=1
    )
    first.train()
    n = first.args.generation_batch_size
    shutil.rmtree(tmp_path / "out" / "checkpoint-2")  # killed after step 2's rollout, before its checkpoint
    resumed = make_trainer(tiny, tmp_path, scripted_env, algorithm="grpo", max_steps=2, save_strategy="no")
    resumed.train(resume_from_checkpoint=True)  # from checkpoint-1: the rollout for update 2 is made again
    keys = logged(tmp_path)
    assert len(keys) == len(set(keys)) == 2 * n
    assert episodes_per(keys, "train") == {0: list(range(n)), 1: list(range(n))}
    assert episodes_per(logged(tmp_path, "trajectories.superseded.jsonl"), "train") == {1: list(range(n))}


def test_a_fresh_run_moves_an_earlier_runs_episodes_aside(tiny, tmp_path, scripted_env):
    make_trainer(tiny, tmp_path, scripted_env, algorithm="grpo", max_steps=1).train()
    earlier = logged(tmp_path)
    make_trainer(tiny, tmp_path, scripted_env, algorithm="grpo", max_steps=1).train()
    assert sorted(logged(tmp_path)) == sorted(earlier)  # the same keys, from the new run
    assert logged(tmp_path, "trajectories.superseded.jsonl") == earlier


def test_a_checkpoint_killed_mid_save_is_never_picked_for_resume(tiny, tmp_path, scripted_env):
    import copy

    from transformers.trainer_utils import get_last_checkpoint

    class KilledWhileSavingStep2(T1Trainer):
        def _save_t1_state(self, folder):
            if self.state.global_step == 2:  # TRL's part of checkpoint-2 is written, t1's is not
                raise KeyboardInterrupt
            super()._save_t1_state(folder)

    model, tokenizer = tiny
    args = config(tmp_path, critic_warmup_iterations=1, max_steps=2, save_strategy="steps", save_steps=1)
    trainer = KilledWhileSavingStep2(
        copy.deepcopy(model), args, processing_class=tokenizer, make_env=lambda task: scripted_env(task)
    )
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    out = tmp_path / "out"
    assert get_last_checkpoint(str(out)) == str(out / "checkpoint-1")  # complete, with t1's state
    assert not (out / "checkpoint-2").exists() and (out / ".checkpoint-2.partial").exists()
    resumed = make_trainer(
        tiny, tmp_path, scripted_env, critic_warmup_iterations=1, max_steps=2, save_strategy="steps", save_steps=1
    )
    resumed.train(resume_from_checkpoint=True)
    assert resumed.state.global_step == 2 and len(resumed.critic_warmup_history) == 1
    assert (out / "checkpoint-2" / "t1_state.json").exists() and not (out / ".checkpoint-2.partial").exists()


def test_an_eval_only_benchmark_task_cannot_be_in_the_training_set():
    from pathlib import Path

    from t1env.task import TaskError
    from t1train.trainer import episode_dataset

    bench_task = Path(__file__).resolve().parents[1] / "fixtures" / "compat" / "harbor" / "hb-log-levels"
    with pytest.raises(TaskError, match="eval-only"):
        episode_dataset([str(bench_task)], [0])
    assert len(episode_dataset(["hello-file"], [0, 1])) == 2
