"""PPO math on action tokens: rewards, GAE skipping observations, value loss, explained variance, IS weights."""

import doctest

import pytest
import torch

from t1train import ppo


def test_docstring_examples():
    result = doctest.testmod(ppo)
    assert result.attempted > 0 and result.failed == 0


def test_gae_skips_observation_tokens_exactly():
    # The same episode with and without observation tokens in between: identical advantages on the actions.
    with_obs = torch.tensor([[1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0]])
    compact = torch.tensor([[1.0, 1.0, 1.0, 1.0]])
    values = torch.tensor([[0.1, 0.2, 9.0, 9.0, 9.0, 0.3, 0.4]])
    rewards = ppo.place_rewards(with_obs, torch.tensor([2.0]))
    adv, ret = ppo.gae(rewards, values, with_obs, gamma=0.9, lam=0.8)
    adv_c, ret_c = ppo.gae(ppo.place_rewards(compact, torch.tensor([2.0])), values[:, [0, 1, 5, 6]], compact, 0.9, 0.8)
    assert torch.allclose(adv[:, [0, 1, 5, 6]], adv_c) and torch.allclose(ret[:, [0, 1, 5, 6]], ret_c)
    assert (adv[:, 2:5] == 0).all() and (ret[:, 2:5] == 0).all()


def test_lambda_one_gives_monte_carlo_returns():
    mask = torch.tensor([[1.0, 0.0, 1.0, 1.0, 0.0]])
    values = torch.randn(1, 5)
    _, ret = ppo.gae(ppo.place_rewards(mask, torch.tensor([3.0])), values, mask, gamma=1.0, lam=1.0)
    assert torch.allclose(ret, torch.tensor([[3.0, 0.0, 3.0, 3.0, 0.0]]))


def test_lambda_zero_is_one_step_td():
    mask = torch.ones(1, 3)
    values = torch.tensor([[0.5, 1.0, 2.0]])
    adv, _ = ppo.gae(ppo.place_rewards(mask, torch.tensor([1.0])), values, mask, gamma=1.0, lam=0.0)
    assert torch.allclose(adv, torch.tensor([[0.5, 1.0, -1.0]]))


def test_per_turn_rewards_sum_to_the_episode_reward():
    mask = torch.tensor([[1.0, 1.0, 0.0, 1.0, 1.0]])
    r = ppo.place_rewards(mask, torch.tensor([3.0]), turn_ends=[[1, 4]], turn_rewards=[[1.0, 0.5]])
    assert r.tolist() == [[0.0, 1.0, 0.0, 0.0, 2.0]] and r.sum() == 3.0


def test_episode_without_actions_gets_nothing():
    r = ppo.place_rewards(torch.zeros(1, 3), torch.tensor([2.0]))
    assert (r == 0).all()


def test_value_loss_clipping_and_explained_variance():
    mask = torch.ones(1, 2)
    returns = torch.tensor([[1.0, 0.0]])
    old = torch.zeros(1, 2)
    loss, frac = ppo.value_loss(torch.tensor([[1.0, 0.0]]), old, returns, mask, clip=0.2)
    assert frac.item() == 0.5 and loss.item() == pytest.approx(0.5 * (0.8**2) / 2)
    loss_unclipped, _ = ppo.value_loss(torch.tensor([[1.0, 0.0]]), old, returns, mask, clip=None)
    assert loss_unclipped.item() == 0.0
    assert ppo.explained_variance(returns, returns, mask) == 1.0
    assert torch.isnan(torch.tensor(ppo.explained_variance(old, torch.ones(1, 2), mask)))


@pytest.mark.parametrize(
    "mode,expected",
    [
        ("token_truncate", [[2.0, 1.0, 0.5]]),
        ("token_mask", [[0.0, 1.0, 1.0]]),
        ("sequence_truncate", [[1.0]]),  # only the middle token is in the mask, and its ratio is 1
    ],
)
def test_off_policy_weights(mode, expected):
    trainer = torch.log(torch.tensor([[0.5, 0.4, 0.1]]))
    sampler = torch.log(torch.tensor([[0.1, 0.4, 0.2]]))
    mask = torch.tensor([[1.0, 1.0, 1.0]]) if mode != "sequence_truncate" else torch.tensor([[0.0, 1.0, 0.0]])
    w = ppo.off_policy_weights(trainer, sampler, mask, mode, clip=2.0)
    assert torch.allclose(w, torch.tensor(expected))
    assert ppo.off_policy_weights(trainer, sampler, mask, "none") is None
    with pytest.raises(ValueError, match="off-policy mode"):
        ppo.off_policy_weights(trainer, sampler, mask, "bogus")
