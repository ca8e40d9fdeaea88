"""The off-policy losses of t1train/offpolicy.py, pinned on tensors computed by hand (and their limits: c = 1 and
delta = inf give PPO's losses)."""

import copy
import doctest
import math

import pytest
import torch

from t1train import offpolicy
from t1train.rollout import EpisodeSpec
from t1train.trainer import T1Trainer

from .conftest import tiny_config


def logp(*probs):
    return torch.log(torch.tensor([list(probs)], dtype=torch.float64))


def test_docstring_examples():
    result = doctest.testmod(offpolicy)
    assert result.attempted > 0 and result.failed == 0


def test_quantile_is_over_action_tokens_only():
    d = torch.tensor([[0.1, -0.2, 0.3, 0.4, 9.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]], dtype=torch.float64)
    # sorted |d| of the four action tokens: 0.1 0.2 0.3 0.4; position 0.9 * 3 = 2.7 -> 0.3 + 0.7 * 0.1
    assert offpolicy.staleness_quantile(d, mask).item() == pytest.approx(0.37)
    assert offpolicy.staleness_quantile(d, torch.zeros_like(mask)).item() == 0.0


def test_adaptive_bounds_shrink_only_the_outward_side_of_gated_tokens():
    # pi = 0.5 everywhere; mu: d = log(0.5/0.5) = 0, log(0.5/0.1) = log 5, log(0.5/0.9), log(0.5/0.0625) = log 8 (no
    # action), log(0.5/0.45)
    lp = logp(0.5, 0.5, 0.5, 0.5, 0.5)
    mu = logp(0.5, 0.1, 0.9, 0.0625, 0.45)
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0, 1.0]], dtype=torch.float64)
    lower, upper, stats = offpolicy.adaptive_clip_bounds(lp, mu, mask, 0.2, 0.3, c=0.25, level=0.5)
    ad = [0.0, math.log(5), math.log(0.9 / 0.5), math.log(0.5 / 0.45)]  # |d| of the action tokens
    q = (sorted(ad)[1] + sorted(ad)[2]) / 2  # the median of four: halfway between the middle two
    assert stats["quantile"].item() == pytest.approx(q)
    assert ad[1] > q and ad[2] > q and ad[3] < q  # tokens 1 (d > 0) and 2 (d < 0) are gated
    s1 = 0.25 + 0.75 / (1 + (ad[1] / q - 1) ** 2)
    s2 = 0.25 + 0.75 / (1 + (ad[2] / q - 1) ** 2)
    assert upper[0].tolist() == pytest.approx([1.3, 1 + 0.3 * s1, 1.3, 1.3, 1.3])
    assert lower[0].tolist() == pytest.approx([0.8, 0.8, 1 - 0.2 * s2, 0.8, 0.8])
    assert stats["gate_rate"].item() == pytest.approx(2 / 4)
    assert stats["min_contraction"].item() == pytest.approx(min(s1, s2))
    assert stats["upper_radius"].item() == pytest.approx((0.3 * 3 + 0.3 * s1) / 4)
    assert stats["lower_radius"].item() == pytest.approx((0.2 * 3 + 0.2 * s2) / 4)


def test_adaptive_loss_clips_gated_token_at_its_shrunk_bound():
    lp, mu = logp(0.6, 0.6), logp(0.2, 0.4)  # ratio pi / mu = 3 and 1.5; d = log 3 (gated), log 1.5
    adv = torch.tensor([[2.0, 2.0]], dtype=torch.float64)
    loss, stats = offpolicy.adaptive_trust_region_loss(lp, mu, adv, torch.ones_like(adv), 0.2, 0.2, c=0.5)
    q = math.log(1.5) + 0.9 * (math.log(3) - math.log(1.5))
    s = 0.5 + 0.5 / (1 + (math.log(3) / q - 1) ** 2)
    assert loss[0].tolist() == pytest.approx([-2 * (1 + 0.2 * s), -2 * 1.2])
    # a negative advantage on tokens whose d > 0: the lower (inward) side is untouched, min picks the ratio
    loss, _ = offpolicy.adaptive_trust_region_loss(lp, mu, -adv, torch.ones_like(adv), 0.2, 0.2, c=0.5)
    assert loss[0].tolist() == pytest.approx([2 * 3.0, 2 * 1.5])


def test_adaptive_with_c_1_is_ppo_exactly():
    g = torch.Generator().manual_seed(0)
    lp = torch.randn(3, 7, generator=g, dtype=torch.float64) - 2
    mu = lp + 0.3 * torch.randn(3, 7, generator=g, dtype=torch.float64)
    adv = torch.randn(3, 7, generator=g, dtype=torch.float64)
    mask = (torch.rand(3, 7, generator=g) > 0.3).to(torch.float64)
    lp.requires_grad_(True)
    loss, stats = offpolicy.adaptive_trust_region_loss(lp, mu, adv, mask, 0.2, 0.28, c=1.0)
    ratio = torch.exp(lp - mu)  # PPO with the sampler as the old policy
    ppo = -torch.min(ratio * adv, torch.clamp(ratio, 0.8, 1.28) * adv)
    assert torch.equal(loss, ppo)
    assert stats["gate_rate"].item() == 0.0 and stats["min_contraction"].item() == 1.0
    assert stats["lower_radius"].item() == pytest.approx(0.2) and stats["upper_radius"].item() == pytest.approx(0.28)


def test_contraction_rejects_a_floor_outside_0_1():
    with pytest.raises(ValueError, match=r"c must be in \(0, 1\]"):
        offpolicy.contraction(torch.tensor([1.0]), 0.5, c=0.0)


def test_binary_divergences_by_hand():
    lp, mu = logp(0.8), logp(0.5)
    assert offpolicy.binary_divergence(lp, mu, "tv").item() == pytest.approx(0.3)
    kl = 0.5 * math.log(0.5 / 0.8) + 0.5 * math.log(0.5 / 0.2)
    assert offpolicy.binary_divergence(lp, mu, "kl").item() == pytest.approx(kl)
    with pytest.raises(ValueError, match="divergence must be one of"):
        offpolicy.binary_divergence(lp, mu, "js")


def test_dppo_masks_tokens_that_moved_far_in_the_direction_of_their_advantage():
    # pi vs mu: far up (0.8 vs 0.5), far down (0.2 vs 0.5), near up (0.55 vs 0.5), each with A > 0 and A < 0
    lp = logp(0.8, 0.8, 0.2, 0.2, 0.55, 0.55)
    mu = logp(0.5, 0.5, 0.5, 0.5, 0.5, 0.5)
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0, 1.0, -1.0]], dtype=torch.float64)
    assert offpolicy.dppo_mask(lp, mu, adv, 0.15, "tv").tolist() == [[0.0, 1.0, 1.0, 0.0, 1.0, 1.0]]
    # binary KL(mu || pi) of 0.8 vs 0.5 is 0.223, of 0.55 vs 0.5 is 0.005: the same decisions at delta 0.05
    assert offpolicy.dppo_mask(lp, mu, adv, 0.05, "kl").tolist() == [[0.0, 1.0, 1.0, 0.0, 1.0, 1.0]]
    assert offpolicy.dppo_mask(lp, mu, adv, math.inf, "tv").tolist() == [[1.0] * 6]


def test_dppo_loss_by_hand():
    lp = logp(0.8, 0.2, 0.5, 0.01).requires_grad_(True)
    mu = logp(0.5, 0.5, 0.4, 0.0001)  # last: pi / mu = 100, capped at 20 (and |pi - mu| < 0.15: kept)
    adv = torch.tensor([[1.0, 1.0, -2.0, 1.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0]], dtype=torch.float64)
    loss, stats = offpolicy.dppo_loss(lp, mu, adv, mask)
    expected = [0.0, -1.0 * 0.4 * math.log(0.2), 2.0 * 1.25 * math.log(0.5), -1.0 * 20 * math.log(0.01)]
    assert loss[0].tolist() == pytest.approx(expected)
    assert stats["masked_rate"].item() == pytest.approx(0.25)
    loss.sum().backward()  # the weight is a constant: d loss / d log pi = -A * w * keep
    assert lp.grad[0].tolist() == pytest.approx([0.0, -0.4, 2.5, -20.0])


def test_dppo_with_infinite_delta_is_the_unclipped_is_surrogate():
    g = torch.Generator().manual_seed(1)
    base = torch.randn(2, 5, generator=g, dtype=torch.float64) - 1.5
    mu = base + 0.2 * torch.randn(2, 5, generator=g, dtype=torch.float64)
    adv = torch.randn(2, 5, generator=g, dtype=torch.float64)
    a = base.clone().requires_grad_(True)
    loss, stats = offpolicy.dppo_loss(a, mu, adv, torch.ones_like(adv), delta=math.inf)
    loss.sum().backward()
    b = base.clone().requires_grad_(True)
    (-adv * torch.exp(b - mu)).sum().backward()  # PPO's surrogate against mu with no clip (epsilon = inf)
    assert torch.allclose(a.grad, b.grad)
    assert stats["masked_rate"].item() == 0.0


# ------------------------------------------------------------------------------------------------ in the trainer
def test_trainer_losses_against_a_stale_sampler(tiny, tmp_path, scripted_env):
    """T1Trainer.compute_loss with off_policy_loss: the adaptive trust region with c = 1 is TRL's own clipped loss
    with the sampler as the old policy; with c < 1 it gates tokens and differs; dppo masks some tokens."""
    model, tokenizer = tiny
    args = tiny_config(
        tmp_path / "out",
        algorithm="grpo",
        off_policy_loss="adaptive_trust_region",
        off_policy_correction="none",
        trust_region_floor=1.0,
        router_aux_loss_coef=0.0,
    )
    trainer = T1Trainer(copy.deepcopy(model), args, processing_class=tokenizer, make_env=lambda t: scripted_env(t))
    seeds = [0, 1, 0, 1]
    trajectories = trainer.rollout([EpisodeSpec("scripted", s) for s in seeds])
    batch = trainer.score_trajectories(trajectories, [{"prompt": "s", "task": "scripted", "seed": s} for s in seeds])
    batch.pop("_metrics")
    mask = batch["tool_mask"].float()
    g = torch.Generator().manual_seed(0)
    batch["advantages"] = torch.randn(mask.shape, generator=g) * mask
    batch["sampling_per_token_logps"] -= 0.5 * torch.rand(mask.shape, generator=g) * mask  # a staler sampler
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1

    adaptive = trainer.compute_loss(trainer.model, batch)
    trainer.args.off_policy_loss = "ppo"
    trl_ppo = trainer.compute_loss(trainer.model, {**batch, "old_per_token_logps": batch["sampling_per_token_logps"]})
    assert adaptive.item() == pytest.approx(trl_ppo.item(), rel=1e-5)
    assert trainer._metrics["train"]["trust_region/gate_rate"] == [0.0]

    trainer.args.off_policy_loss, trainer.args.trust_region_floor = "adaptive_trust_region", 0.1
    tighter = trainer.compute_loss(trainer.model, batch)
    assert trainer._metrics["train"]["trust_region/gate_rate"][-1] > 0.0
    assert trainer._metrics["train"]["trust_region/min_contraction"][-1] < 1.0
    assert tighter.item() != pytest.approx(adaptive.item(), rel=1e-6)

    # the tiny model spreads its probability thin (|pi - mu| ~ 1e-4): a threshold below that; every token moved up
    # (pi > mu), so the ones with A > 0 are dropped and those with A <= 0 kept
    trainer.args.off_policy_loss, trainer.args.dppo_delta = "dppo", 1e-9
    dppo = trainer.compute_loss(trainer.model, batch)
    assert torch.isfinite(dppo)
    positive = ((batch["advantages"] > 0).float() * mask).sum() / mask.sum()
    assert trainer._metrics["train"]["dppo/masked_rate"][-1] == pytest.approx(positive.item())
